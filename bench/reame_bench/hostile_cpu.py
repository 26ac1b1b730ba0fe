"""Where the CPU went during a phase of `reame bench --hostile`, from /proc: the server's, the
attacker's and the bench's own processes, and everything else on the machine (other work on a
shared machine takes cores that the phases' ratio would otherwise blame on the attack)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

_HZ = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds the machine spent busy since boot, over all cores: user, nice, system, irq
    and softirq (not idle, iowait, or steal: time the hypervisor gave to another guest)."""
    with open("/proc/stat") as f:
        user, nice, system, _, _, irq, softirq = (int(x) for x in f.readline().split()[1:8])
    return (user + nice + system + irq + softirq) / _HZ


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) a process has used; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _HZ  # utime, stime (fields 14, 15)


@dataclass(frozen=True, slots=True)
class CpuMark:
    at: float
    busy_s: float
    by_process: dict[str, float]

    @classmethod
    def now(cls, pids: Mapping[str, int]) -> CpuMark:
        return cls(
            time.monotonic(),
            machine_busy_s(),
            {name: process_cpu_s(pid) for name, pid in pids.items()},
        )


def cores_between(start: CpuMark, end: CpuMark) -> dict[str, float]:
    """Cores used on average between two marks: each process's, and `others` (the rest)."""
    seconds = max(end.at - start.at, 1e-9)
    out = {
        name: round((end.by_process[name] - start.by_process[name]) / seconds, 2)
        for name in start.by_process
    }
    busy = (end.busy_s - start.busy_s) / seconds
    out["others"] = round(max(0.0, busy - sum(out.values())), 2)
    return out
