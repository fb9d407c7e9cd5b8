import json,sys,statistics as st,collections
d=json.load(open(sys.argv[1]))
sp=collections.defaultdict(list); tm=collections.defaultdict(list)
for i,L in enumerate(d['launches']):
    t={(r['nbytes'],r['label']):r['time_us'] for r in (L.get('rows') or [])}
    for (n,lab),x in t.items():
        tm[(n,lab)].append(x)
        if lab=='auto' and (n,'native') in t: sp[n].append((t[(n,'native')]/x, i))
print(f"{len(d['launches'])} launches; failed: {sum(1 for L in d['launches'] if not L.get('rows'))}")
print(f"{'size':>9} {'min':>6} {'median':>6} {'max':>6}  launches<0.9  worst launch")
for n,s in sorted(sp.items()):
    v=[x for x,_ in s]; w=min(s)
    print(f"{n:>9} {min(v):6.2f} {st.median(v):6.2f} {max(v):6.2f}  {sum(x<0.9 for x in v):>5}        L{w[1]}")
