"""The Palimpsest on a real disk: drafts from earlier generations, across instances (processes)
and restarts; a writer killed mid-record, a flipped bit, a full or read-only disk; the budget."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from disk_faults import mount, tmpfs
from reame import metrics
from reame.speculation.context_lookup import ContextLookup
from reame.speculation.palimpsest import SIZES, TOKEN_BYTES, Palimpsest
from reame.speculation.palimpsest_records import encode_record
from reame_command import reame_command

FP = "fp-test"
STORY = list(range(100, 140))


def pal_files(root: Path, suffix: str = ".pal") -> list[Path]:
    return sorted((root / FP).glob(f"*{suffix}"))


def test_a_generation_is_drafted_from_where_its_words_recur(tmp_path: Path) -> None:
    pal = Palimpsest(tmp_path, FP, 1 << 20)
    pal.add(STORY)
    assert pal.propose([7, 7, 110, 111, 112], 4) == [113, 114, 115, 116]
    assert pal.propose([7, 137, 138, 139], 4) == []  # the record's end: nothing follows
    assert pal.propose([7, 8, 9], 4) == []  # never seen
    assert pal.propose([110, 111], 4) == []  # too short to match
    pal.add([1, 110, 111, 112, 50, 51, 52])
    assert pal.propose([110, 111, 112], 3) == [50, 51, 52]  # the most recent text wins


def test_another_instance_sees_it_at_start_and_on_refresh(tmp_path: Path) -> None:
    first = Palimpsest(tmp_path, FP, 1 << 20)
    first.add(STORY)
    second = Palimpsest(tmp_path, FP, 1 << 20)  # another process, or a restart
    assert second.propose([120, 121, 122], 2) == [123, 124]
    first.add([9, 8, 7, 6, 5, 4])
    assert second.propose([9, 8, 7], 2) == []
    second.refresh()
    assert second.propose([9, 8, 7], 2) == [6, 5]
    second.add([60, 61, 62, 63, 64])
    first.refresh()
    assert first.propose([60, 61, 62], 2) == [63, 64]
    assert len(pal_files(tmp_path)) == 2  # one file a writer


def test_a_writer_killed_mid_record_leaves_a_usable_archive(tmp_path: Path) -> None:
    code = f"""
        import sys
        from pathlib import Path
        from reame.speculation.palimpsest import Palimpsest
        pal = Palimpsest(Path(sys.argv[1]), "{FP}", 1 << 30)
        print("ready", flush=True)
        i = 0
        while True:
            pal.add([i % 50000 + j for j in range(2000)])
            i += 1
    """
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "app")}
    writer = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), str(tmp_path)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    writer.send_signal(signal.SIGKILL)
    writer.wait(30)
    path = pal_files(tmp_path)[-1]  # the file it was writing
    # whatever the kill left, a short tail is possible: make one for sure
    with open(path, "ab") as f:
        f.write(encode_record(list(range(500, 600)))[:37])
    pal = Palimpsest(tmp_path, FP, 1 << 30)
    assert pal.num_tokens >= 2000 and pal.num_tokens % 2000 == 0  # whole records only
    assert pal.num_set_aside == 0
    assert pal.propose([0, 1, 2], 3) == [3, 4, 5]
    pal.add(STORY)  # its own file: the damaged one is never appended to
    assert Palimpsest(tmp_path, FP, 1 << 30).propose([100, 101, 102], 1) == [103]


def test_a_flipped_bit_sets_the_file_aside_and_serving_goes_on(tmp_path: Path) -> None:
    Palimpsest(tmp_path, FP, 1 << 20).add(STORY)
    other = Palimpsest(tmp_path, FP, 1 << 20)
    other.add([70, 71, 72, 73, 74])
    damaged = pal_files(tmp_path)[0]
    data = bytearray(damaged.read_bytes())
    data[20] ^= 0x10  # inside the first record's tokens
    damaged.write_bytes(bytes(data))
    pal = Palimpsest(tmp_path, FP, 1 << 20)
    assert pal.num_set_aside == 1
    assert pal_files(tmp_path, ".bad") == [damaged.with_suffix(".bad")]
    assert pal.propose([110, 111, 112], 2) == []  # nothing served from the bad file
    assert pal.propose([70, 71, 72], 2) == [73, 74]  # the good one still drafts


def test_the_archive_stays_in_its_budget_and_keeps_what_is_used(tmp_path: Path) -> None:
    record_bytes = len(encode_record(STORY))
    budget = 12 * record_bytes
    pal = Palimpsest(
        tmp_path, FP, budget, segment_bytes=2 * record_bytes, max_resident_bytes=1 << 30
    )
    pal.add(STORY)  # the oldest, but used below
    for i in range(1, 40):
        pal.add([i * 1000 + j for j in range(len(STORY))])
        assert pal.propose([110, 111, 112], 1) == [113]  # in use: never the one to go
        assert sum(p.stat().st_size for p in pal_files(tmp_path)) <= budget
    assert pal.propose([2000, 2001, 2002], 1) == []  # an old unused one went (its file)
    assert pal.propose([39000, 39001, 39002], 1) == [39003]


def test_a_full_disk_stops_writes_not_drafting(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "64k") as root:
        pal = Palimpsest(root, FP, 1 << 30, segment_bytes=1 << 30)
        for i in range(200):
            pal.add([i * 1000 + j for j in range(100)])  # 80 kB in all: the disk fills
        assert pal.num_write_failures > 0
        assert pal.propose([199000, 199001, 199002], 2) == [199003, 199004]  # from memory


def test_a_read_only_directory_is_read_and_never_written(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "1m") as root:
        Palimpsest(root, FP, 1 << 20).add(STORY)
        mount("-o", "remount,ro", str(root))
        pal = Palimpsest(root, FP, 1 << 20)
        assert pal.propose([100, 101, 102], 1) == [103]
        pal.add([5, 6, 7, 8, 9, 10])
        assert pal.num_write_failures == 1
        assert pal.propose([5, 6, 7], 1) == [8]


def test_context_lookup_drafts_what_followed_the_last_tokens_earlier() -> None:
    lookup = ContextLookup()
    history = [5, 6, 7, 8, 1, 2, 5, 6, 7]
    assert lookup.propose(history, 3) == [8, 1, 2]
    history += [8, 1]
    assert lookup.propose(history, 2) == [2, 5]  # four tokens matched this time
    fresh = ContextLookup()
    assert fresh.propose([1, 2, 3, 4], 3) == []
    assert fresh.propose([1, 2, 3, 4], 0) == []


def palimpsest_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return reame_command("palimpsest", *args)


def test_the_command_shows_what_is_kept_and_clears_it(tmp_path: Path) -> None:
    pal = Palimpsest(tmp_path, FP, 1 << 20)
    pal.add(STORY)
    pal.add([1, 2, 3, 4, 5, 6])
    (tmp_path / FP / "x.bad").write_bytes(b"junk")
    out = palimpsest_cli("stats", "--dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert f"{FP}: 1 file(s), 2 answers, {len(STORY) + 6} tokens" in out.stdout
    assert "damaged 0, set aside 1" in out.stdout
    out = palimpsest_cli("clear", "--dir", str(tmp_path))
    assert out.returncode == 0 and "removed 2 file(s)" in out.stdout
    assert Palimpsest(tmp_path, FP, 1 << 20).num_tokens == 0
    bad = palimpsest_cli("stats", "--dir", str(tmp_path / FP / "missing.pal"))
    assert bad.returncode == 0 and "empty" in bad.stdout


def test_memory_stays_in_the_budget_and_is_reported(tmp_path: Path) -> None:
    budget = 100 * len(STORY) * TOKEN_BYTES  # about 100 records' worth in memory
    pal = Palimpsest(tmp_path, FP, 1 << 30, segment_bytes=20 * 172, max_resident_bytes=budget)
    for i in range(1, 400):
        pal.add([i * 1000 + j for j in range(len(STORY))])
        assert pal.live_bytes <= budget
        # the array may hold evicted records' separators until a compaction (a quarter)
        assert pal.num_tokens * TOKEN_BYTES <= budget
    pal.wait_for_index()
    assert pal.propose([399000, 399001, 399002], 2) == [399003, 399004]
    assert pal.propose([2000, 2001, 2002], 1) == []  # evicted: never drafted from
    # the array's room to grow and not yet compacted separators, and the recent dicts, which
    # may hold 4096 entries a size before a build is due (fixed, whatever the budget)
    assert 0 < pal.resident_bytes < 2 * budget + 2 * len(SIZES) * 4096 * 100
    gauge = metrics.REGISTRY.get_sample_value("reame_palimpsest_resident_bytes")
    assert gauge == pal.resident_bytes


def test_the_index_is_built_off_the_adding_thread(tmp_path: Path) -> None:
    pal = Palimpsest(tmp_path, FP, 1 << 30, max_resident_bytes=1 << 30)
    for i in range(300):  # 12k tokens: past the recent dict's 4096 entries, a build starts
        pal.add([i * 1000 + j for j in range(len(STORY))])
        assert pal.propose([i * 1000, i * 1000 + 1, i * 1000 + 2], 1) == [i * 1000 + 3]
    builder = pal._index._builder
    assert builder is not None and builder is not threading.current_thread()
    pal.wait_for_index()
    assert pal._index._indexes[3].size > 0  # swapped in
    assert pal.propose([5000, 5001, 5002], 1) == [5003]  # from the built index
    assert Palimpsest(tmp_path, FP, 1 << 30).num_tokens == 300 * len(STORY)


def test_files_are_private(tmp_path: Path) -> None:
    pal = Palimpsest(tmp_path / "state" / "palimpsest", FP, 1 << 20)
    pal.add(STORY)
    for path in [tmp_path / "state", *(tmp_path / "state").rglob("*")]:
        assert path.stat().st_mode & 0o077 == 0, path
