import json, statistics as st, sys
recs = json.load(open(sys.argv[1]))['records']
for mode in sorted({r['mode'] for r in recs}):
    out = {}
    for srv in ('reame', 'llama-server'):
        rs = [r for r in recs if r['mode'] == mode and r['server'] == srv and not r['error']]
        out[srv] = (st.median(r['ttft'] for r in rs), st.mean(r['ttft'] for r in rs))
    (am, aa), (bm, ba) = out['reame'], out['llama-server']
    print(f"{mode}: median {am:.3f} vs {bm:.3f} s -> {am / bm:.2f}x; mean {aa:.3f} vs {ba:.3f} s -> {aa / ba:.2f}x")
