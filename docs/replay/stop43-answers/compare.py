import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))['records']
    servers = sorted({r['server'] for r in d})
    for mode in sorted({r['mode'] for r in d}):
        by = {s: {r['index']: r['answer'] for r in d if r['server'] == s and r['mode'] == mode} for s in servers}
        a, b = servers
        diff = [i for i in by[a] if by[a][i] != by[b].get(i)]
        print(path, mode, f"{a} vs {b}: same {len(by[a]) - len(diff)} of {len(by[a])}", "differ", diff)
