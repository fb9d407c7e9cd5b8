import json,glob,statistics as st,collections,sys
pre=sys.argv[1] if len(sys.argv)>1 else 'q'
t=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(f'{pre}_*_*.json')):
    _,i,v=f[:-5].split('_')
    for r in json.load(open(f))['rows']:
        t[(r['nbytes'],r['label'])][(int(i),v)]=r['time_us']
print(f"{'size':>9} {'alg':>9}  new/old per launch (median [min,max]); old us, new us medians")
for k in sorted(t):
    d=t[k]; L=sorted({i for i,_ in d})
    rat=[d[(i,'new')]/d[(i,'old')] for i in L if (i,'new') in d and (i,'old') in d]
    print(f"{k[0]:>9} {k[1]:>9}  {st.median(rat):.3f} [{min(rat):.3f}, {max(rat):.3f}]  {st.median([d[(i,'old')] for i in L]):9.2f} {st.median([d[(i,'new')] for i in L]):9.2f}")
