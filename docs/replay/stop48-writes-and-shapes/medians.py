"""Later turns (turn 2 on) of bench --replay --out directories: median time to first token and prompt tokens computed, Reame and llama-server."""
import json,statistics as st,sys
for f in sys.argv[1:]:
    d=json.load(open(f+'/per_request.json')); r=d['records']
    out=[f.split('/')[-1]]
    for mode in ('one-client','one-client-restart'):
        m={}
        for srv in ('reame','llama-server'):
            xs=[x for x in r if x['server']==srv and x['mode']==mode and x['turn']>1]
            m[srv]=(st.median(x['ttft'] for x in xs), st.median(x['prompt_tokens']-x['cached_tokens'] for x in xs))
        out.append(f"{mode}: {m['reame'][0]:.3f} vs {m['llama-server'][0]:.3f} s = {m['reame'][0]/m['llama-server'][0]:.2f}x (computed {m['reame'][1]:g} vs {m['llama-server'][1]:g})")
    print(' | '.join(out))
