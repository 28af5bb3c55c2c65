"""Issue 27: modules that do one job. No module of the package outside migrations is over
600 lines (a module that grows past it is split by what its parts do, docs/architecture.md)."""

from __future__ import annotations

from conftest import REPO

LIMIT = 600


def test_no_module_is_over_600_lines():
    over = {}
    for path in sorted((REPO / "ledger").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if "/migrations/" in rel:
            continue
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > LIMIT:
            over[rel] = n
    assert not over, f"modules over {LIMIT} lines: {over}"


def test_the_size_check_sees_the_package():
    # the walk above finds the package's modules (an empty walk would pass anything)
    found = [p for p in (REPO / "ledger").rglob("*.py") if "/migrations/" not in p.as_posix()]
    assert len(found) > 100 and any(p.name == "fold.py" for p in found)
