"""The busy launches whose per-(size, algorithm) median is over 2x the quiet launches' median, with
the launch's placement (even launches unpinned, odd ones -bind-to core).
    python over2x.py busy60.json quiet20.json"""
import json,sys,statistics as st,collections
b=json.load(open(sys.argv[1])); q=json.load(open(sys.argv[2]))
qm=collections.defaultdict(list)
for L in q['launches']:
    for r in L['rows']: qm[(r['nbytes'],r['label'])].append(r['time_us'])
qm={k:st.median(v) for k,v in qm.items()}
for i,L in enumerate(b['launches']):
    bad=[(r['nbytes'],r['label'],round(r['time_us']/qm[(r['nbytes'],r['label'])],2)) for r in L['rows'] if r['time_us']>2*qm[(r['nbytes'],r['label'])]]
    if bad: print(i, 'pinned' if i%2 else 'unpinned', bad)
