"""A state read on the real llama context, in parts: size, the buffer (bytearray), the copy. PRETOUCH=MB first touches that much memory."""
import time, sys, ctypes
from pathlib import Path
from reame.llama.model import Model
from reame.llama.context import Context, ContextShape
from reame.llama.binding import lc
m = Model(Path(sys.argv[1]))
c = Context(m, ContextShape(num_cells=16384, batch_size=512, num_sequences=4, num_threads=2))
toks = [10 + (7*i) % 400 for i in range(500)]
c.decode(toks, list(range(500)), [0]*500, [False]*499+[True])
kept=[]
import os
if os.environ.get("PRETOUCH"):
    t=time.perf_counter(); x=bytearray(int(os.environ["PRETOUCH"])<<20); del x; print("pretouch", round(time.perf_counter()-t,2))
for k in range(12):
    t0=time.perf_counter(); size = lc.llama_state_seq_get_size_ext(c._ptr, 0, 0)
    t1=time.perf_counter(); data = bytearray(size)
    t2=time.perf_counter(); view = (ctypes.c_uint8 * size).from_buffer(data); w = lc.llama_state_seq_get_data_ext(c._ptr, view, size, 0, 0); del view
    t3=time.perf_counter()
    kept.append(data)
    print(f"size {1000*(t1-t0):.1f} alloc {1000*(t2-t1):.1f} copy {1000*(t3-t2):.1f} ms")
    c.decode([5],[500+k],[0],[True])
