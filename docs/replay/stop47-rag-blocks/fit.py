import json, sys, numpy as np
for f in sys.argv[1:]:
    r = json.load(open(f)); x = np.array([a['prompt']-a['cached'] for a in r]); y = np.array([a['ttft'] for a in r])
    b, a = np.polyfit(x, y, 1)
    print(f"{f}: ttft = {a*1000:.0f} ms + {b*1e6:.0f} us/token; median {np.median(y):.3f} mean {y.mean():.3f} computed {x.sum()}")
