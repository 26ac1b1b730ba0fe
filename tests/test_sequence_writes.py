"""One owner of sequence state: outside engine/sequence.py (its own methods), only the scheduler
assigns a sequence's fields. A scan of the engine's source (assignments, augmented and tuple ones,
`del`, and in-place list calls on a field of any name but `self`). Run as a script, it prints
every write it finds (docs/architecture.md shows its output)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import reame.engine
from reame.engine.sequence import Sequence

ENGINE = Path(reame.engine.__file__).parent
FIELDS = {f.name for f in fields(Sequence)}
MUTATORS = {"append", "extend", "pop", "clear", "remove", "insert", "sort", "reverse"}
OWNERS = {"sequence.py", "scheduler.py"}


def _is_field(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr in FIELDS
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    )


def _targets(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _targets(element)
    elif isinstance(node, ast.Subscript):
        yield from _targets(node.value)
    else:
        yield node


def writes(path: Path) -> list[str]:
    """`file:line: statement` of each write to a sequence field in one source file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        found: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            found = [t for x in node.targets for t in _targets(x) if _is_field(t)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            found = [t for t in _targets(node.target) if _is_field(t)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and _is_field(node.func.value)
        ):
            found = [node.func.value]
        if found:
            out.append(f"engine/{path.name}:{node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return sorted(out, key=lambda w: (w.split(":")[0], int(w.split(":")[1])))


def test_only_the_scheduler_and_the_sequence_itself_assign_a_sequences_fields() -> None:
    elsewhere = [w for p in sorted(ENGINE.glob("*.py")) if p.name not in OWNERS for w in writes(p)]
    assert elsewhere == []
    assert writes(ENGINE / "scheduler.py")  # the scan sees the writes that are there


if __name__ == "__main__":
    for path in sorted(ENGINE.glob("*.py")):
        for write in writes(path) if path.name != "sequence.py" else []:
            print(write)
