"""../stop54-first-token/trace_path.py (each request's path timed to stderr) with the prefix
cache's reads and its writer's writes and encodes timed too. Usage: as trace_path.py."""

import sys
from pathlib import Path

PATH = Path(__file__).parent.parent / "stop54-first-token" / "trace_path.py"
source = PATH.read_text().replace("sys.exit(main(sys.argv[1:]))", "")
exec(compile(source, str(PATH), "exec"))

import reame.cache.prefix_cache as pc  # noqa: E402
import reame.cache.snapshot_writer as sw  # noqa: E402

wrap(sw.SnapshotWriter, "_write_one", "write")  # noqa: F821
wrap(sw.SnapshotWriter, "_encode", "encode")  # noqa: F821
wrap(pc.PrefixCache, "_read", "read")  # noqa: F821
sys.exit(main(sys.argv[1:]))  # noqa: F821
