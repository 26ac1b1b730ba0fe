"""Zero-config sizing: threads, context length, batch size and parallel sequences picked from the
machine (cgroup- and affinity-aware) and the model, each with the reason it was picked."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from reame.config import Settings
from reame.models.gguf_facts import ModelFacts

DEFAULT_PARALLEL = 4
DEFAULT_CONTEXT_CAP = 4096
DEFAULT_BATCH = 512
MIN_CONTEXT = 512
KV_SHARE_OF_FREE_MEMORY = 0.5


@dataclass(slots=True, frozen=True)
class Tuned:
    threads: int
    context_length: int
    batch_size: int
    parallel: int
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def num_cells(self) -> int:
        """KV cells of the context: a full context for each sequence."""
        return self.context_length * self.parallel


def _cgroup_cpu_limit(root: Path) -> float | None:
    """The CPU quota of cgroup v2 (cpu.max), else of v1 (Docker on an older host: cpu/)."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None  # -1: no quota


def _cgroup_memory_room(root: Path) -> int | None:
    """Limit less use, of cgroup v2, else of v1 (whose "no limit" is a huge number)."""
    for limit_file, used_file in (
        (root / "memory.max", root / "memory.current"),
        (root / "memory" / "memory.limit_in_bytes", root / "memory" / "memory.usage_in_bytes"),
    ):
        try:
            limit = limit_file.read_text().strip()
            used = int(used_file.read_text())
        except (OSError, ValueError):
            continue
        return None if limit == "max" else int(limit) - used
    return None


def usable_cores(
    sys_root: Path = Path("/sys"), cgroup_root: Path = Path("/sys/fs/cgroup")
) -> tuple[int, str]:
    """Physical cores this process may run on: affinity mask, SMT siblings folded, cgroup quota."""
    cpus = sorted(os.sched_getaffinity(0))
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topo = sys_root / f"devices/system/cpu/cpu{cpu}/topology"
        try:
            cores.add(
                (
                    (topo / "physical_package_id").read_text().strip(),
                    (topo / "core_id").read_text().strip(),
                )
            )
        except OSError:
            cores.add(("?", str(cpu)))
    count = len(cores) or 1
    why = f"{len(cpus)} CPUs in the affinity mask, {count} physical cores"
    limit = _cgroup_cpu_limit(cgroup_root)
    if limit is not None and limit < count:
        count = max(1, int(limit))
        why += f", cgroup quota {limit:g} CPUs"
    return count, why


def available_memory(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """Bytes this process can still use: MemAvailable, capped by the cgroup's limit."""
    free = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            free = int(line.split()[1]) * 1024
    room = _cgroup_memory_room(cgroup_root)
    if room is not None:
        free = min(free, room)
    return max(free, 0)


def tune(settings: Settings, facts: ModelFacts, cores: tuple[int, str], memory_bytes: int) -> Tuned:
    reasons: dict[str, str] = {}
    threads = settings.threads
    if threads is None:
        threads, reasons["threads"] = cores[0], f"auto: {cores[1]}"
    parallel = settings.parallel
    if parallel is None:
        parallel = DEFAULT_PARALLEL
        reasons["parallel"] = (
            f"auto: {DEFAULT_PARALLEL} sequences share each read of the weights on a CPU"
        )
    context = settings.context_length
    if context is None:
        context = min(facts.context_train, DEFAULT_CONTEXT_CAP)
        budget = KV_SHARE_OF_FREE_MEMORY * max(memory_bytes - facts.file_size, 0)
        while context > MIN_CONTEXT and context * parallel * facts.kv_bytes_per_token > budget:
            context //= 2
        kv_mib = context * parallel * facts.kv_bytes_per_token / 2**20
        reasons["context_length"] = (
            f"auto: min(trained {facts.context_train}, {DEFAULT_CONTEXT_CAP}) fitted to memory: "
            f"{parallel} x {context} tokens x {facts.kv_bytes_per_token / 1024:.1f} KiB = "
            f"{kv_mib:.0f} MiB of KV, within half of {memory_bytes / 2**30:.1f} GiB free"
        )
    batch = settings.batch_size
    if batch is None:
        batch = min(DEFAULT_BATCH, context)
        reasons["batch_size"] = f"auto: min({DEFAULT_BATCH}, context_length)"
    return Tuned(threads, context, batch, parallel, reasons)
