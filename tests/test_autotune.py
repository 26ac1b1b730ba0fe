from __future__ import annotations

from pathlib import Path

from reame.autotune import available_memory, tune, usable_cores
from reame.config import Settings
from reame.models.gguf_facts import ModelFacts

GiB = 2**30


def facts(context_train: int = 8192, kv: int = 23040, size: int = 100 * 2**20) -> ModelFacts:
    return ModelFacts(Path("m.gguf"), "llama", "m", size, context_train, 30, kv, True)


def fake_cpu_tree(root: Path, cores: list[tuple[int, int]]) -> Path:
    for cpu, (package, core) in enumerate(cores):
        topo = root / f"devices/system/cpu/cpu{cpu}/topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{package}\n")
        (topo / "core_id").write_text(f"{core}\n")
    return root


def test_smt_siblings_count_once(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda _: {0, 1, 2, 3})
    sys_root = fake_cpu_tree(tmp_path / "sys", [(0, 0), (0, 0), (0, 1), (0, 1)])
    count, why = usable_cores(sys_root, tmp_path / "nocgroup")
    assert count == 2
    assert "4 CPUs" in why


def test_a_cgroup_quota_caps_the_threads(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda _: {0, 1, 2, 3})
    sys_root = fake_cpu_tree(tmp_path / "sys", [(0, i) for i in range(4)])
    cgroup = tmp_path / "cgroup"
    cgroup.mkdir()
    (cgroup / "cpu.max").write_text("150000 100000\n")
    count, why = usable_cores(sys_root, cgroup)
    assert count == 1
    assert "quota 1.5" in why


def test_a_cgroup_v1_quota_and_memory_limit_count_too(tmp_path: Path, monkeypatch) -> None:
    """Docker on a cgroup v1 host (cpu/ and memory/ controllers): found in a container here,
    where a 1-CPU container tuned itself for the host's 2 cores and its free memory."""
    monkeypatch.setattr("os.sched_getaffinity", lambda _: {0, 1})
    sys_root = fake_cpu_tree(tmp_path / "sys", [(0, 0), (0, 1)])
    cgroup = tmp_path / "cgroup"
    (cgroup / "cpu").mkdir(parents=True)
    (cgroup / "cpu" / "cpu.cfs_quota_us").write_text("100000\n")
    (cgroup / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    (cgroup / "memory").mkdir()
    (cgroup / "memory" / "memory.limit_in_bytes").write_text(f"{GiB}\n")
    (cgroup / "memory" / "memory.usage_in_bytes").write_text(f"{GiB // 4}\n")
    count, why = usable_cores(sys_root, cgroup)
    assert count == 1 and "quota 1 CPUs" in why
    assert available_memory(cgroup) <= GiB - GiB // 4
    (cgroup / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")  # no quota
    (cgroup / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert usable_cores(sys_root, cgroup)[0] == 2
    assert available_memory(cgroup) > GiB - GiB // 4  # NOTE: this machine has more free


def test_defaults_fit_a_small_model_in_plenty_of_memory() -> None:
    t = tune(Settings(), facts(), (2, "2 cores"), 20 * GiB)
    assert (t.threads, t.parallel, t.context_length, t.batch_size) == (2, 4, 4096, 512)
    assert t.num_cells == 4 * 4096
    assert set(t.reasons) == {"threads", "parallel", "context_length", "batch_size"}


def test_little_memory_shrinks_the_context() -> None:
    t = tune(Settings(), facts(kv=131072), (2, "x"), 1 * GiB)
    assert t.context_length * t.parallel * 131072 <= 0.5 * (1 * GiB)
    assert t.context_length < 4096


def test_the_trained_context_caps_the_default() -> None:
    assert tune(Settings(), facts(context_train=2048), (2, "x"), 20 * GiB).context_length == 2048


def test_explicit_settings_are_kept_and_not_explained_as_auto() -> None:
    s = Settings(threads=1, parallel=2, context_length=1024, batch_size=64)
    t = tune(s, facts(), (8, "x"), 20 * GiB)
    assert (t.threads, t.parallel, t.context_length, t.batch_size) == (1, 2, 1024, 64)
    assert t.reasons == {}
