import json, statistics as st, sys
recs=json.load(open(sys.argv[1]))['records']
for mode in sorted({r['mode'] for r in recs}):
    out={}
    for srv in ('reame','llama-server'):
        rs=[r for r in recs if r['mode']==mode and r['server']==srv and not r['error']]
        out[srv]=(st.median(r['ttft'] for r in rs), sum(r['prompt_tokens']-r['cached_tokens'] for r in rs), sum(r['prompt_tokens'] for r in rs), len(rs))
    a,b=out['reame'],out['llama-server']
    print(f"{mode}: ttft all requests reame {a[0]:.3f} s, llama-server {b[0]:.3f} s -> {a[0]/b[0]:.2f}x; prompt tokens computed {a[1]} vs {b[1]} of {a[2]} ({a[3]} requests)")
    # answers equal?
    ra={r['index']:r['answer'] for r in recs if r['mode']==mode and r['server']=='reame'}
    rb={r['index']:r['answer'] for r in recs if r['mode']==mode and r['server']=='llama-server'}
    print("  same answers as llama-server:", sum(ra[i]==rb.get(i) for i in ra), "of", len(ra))
