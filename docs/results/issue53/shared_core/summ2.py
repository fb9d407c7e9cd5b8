import json,glob,statistics as st,collections,sys
pre=sys.argv[1]; A,B=sys.argv[2],sys.argv[3]
t=collections.defaultdict(dict); sp=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(f'{pre}_*_*.json')):
    _,i,v=f.rsplit('/',1)[-1][:-5].split('_')
    rows={(r['nbytes'],r['label']):r['time_us'] for r in json.load(open(f))['rows']}
    for (n,lab),x in rows.items():
        if lab=='auto':
            t[n][(int(i),v)]=x
            sp[n][v].append(rows[(n,'native')]/x)
print(f"{'size':>9}  {B}/{A} auto time per launch: median [min,max] | auto speed-up over native, min/median: {A} ; {B}")
for n in sorted(t):
    d=t[n]; L=sorted({i for i,_ in d})
    r=[d[(i,B)]/d[(i,A)] for i in L if (i,A) in d and (i,B) in d]
    print(f"{n:>9}  {st.median(r):.3f} [{min(r):.3f}, {max(r):.3f}] | {min(sp[n][A]):.2f}/{st.median(sp[n][A]):.2f} ; {min(sp[n][B]):.2f}/{st.median(sp[n][B]):.2f}")
