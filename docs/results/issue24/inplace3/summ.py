import re
import statistics as st
import sys


# per launch: time(us) per (size, case)
def parse(fn):
    L=[];cur=None
    for line in open(fn):
        if line.startswith('==='): cur={'hdr':line.strip()}; L.append(cur); continue
        m=re.match(r'\s*(\d+)\s+(\S+)\s+([\d.]+)\s',line)
        if m and cur is not None: cur[(int(m[1]),m[2])]=float(m[3])
    return L
for b in sys.argv[1:]:
    L=parse(b+'.log')
    print(b, len(L),'launches')
    keys=sorted({k for l in L for k in l if k!='hdr'})
    for s in sorted({k[0] for k in keys}):
        for c in sorted({k[1] for k in keys if k[0]==s and not k[1].endswith('/inpl')}):
            r=[l[(s,c+'/inpl')]/l[(s,c)] for l in L if (s,c) in l and (s,c+'/inpl') in l]
            t=[l[(s,c)] for l in L if (s,c) in l]; ti=[l[(s,c+'/inpl')] for l in L if (s,c+'/inpl') in l]
            print(f"  {s>>20:3d}M {c:8s} oop med {st.median(t)/1e3:6.2f} ms [{min(t)/1e3:.2f} {max(t)/1e3:.2f}]  inpl med {st.median(ti)/1e3:6.2f} [{min(ti)/1e3:.2f} {max(ti)/1e3:.2f}]  ratio per launch: "+" ".join(f"{x:.2f}" for x in r))
