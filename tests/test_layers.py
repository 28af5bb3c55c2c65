"""The contracts (DESIGN §6, docs/architecture.md) are enforced by import-linter, config in
pyproject.toml: the layers (every module in one), no import cycle inside any package, and no
SQLAlchemy, Alembic or Typer imported by a warm-path module. Each is shown to fail once on a
deliberately broken copy of the package (never the real tree)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    # run from `cwd` so that the `ledger` package found first is the one in `cwd`
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"})


def test_layer_contracts_hold():
    res = _lint(REPO)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "4 kept, 0 broken" in res.stdout


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "ledger", tmp_path / "ledger", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path / "ledger"


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


def test_a_back_edge_breaks_the_contract(tmp_path):
    """A deliberately added back-edge (records importing the CLI) is caught."""
    _append(_copy(tmp_path) / "records" / "ids.py", "import ledger.cli.common  # a back-edge")
    res = _lint(tmp_path)
    assert res.returncode != 0, res.stdout
    assert "ledger.records is not allowed to import ledger.cli" in res.stdout


def test_a_cycle_inside_a_package_breaks_the_contract(tmp_path):
    """Two sibling modules of one layer importing each other (work <-> scan, lazily) is caught."""
    _append(_copy(tmp_path) / "index" / "work.py",
            "def _late():\n    from ledger.index import scan  # a cycle: scan imports work")
    res = _lint(tmp_path)
    assert res.returncode != 0, res.stdout
    assert "no import cycle inside any package BROKEN" in res.stdout
    assert "No cycles are allowed in ledger.index" in res.stdout


def test_sqlalchemy_in_a_warm_module_breaks_the_contract(tmp_path):
    _append(_copy(tmp_path) / "report" / "render.py", "import sqlalchemy  # on the warm path")
    res = _lint(tmp_path)
    assert res.returncode != 0, res.stdout
    assert "the warm path imports no SQLAlchemy, Alembic or Typer BROKEN" in res.stdout
    assert "ledger.report.render -> sqlalchemy" in res.stdout


def test_sqlalchemy_outside_the_schema_breaks_the_contract(tmp_path):
    """Issue 27: SQLAlchemy belongs to the schema; a module off the warm path importing it (a
    launcher's, lazily) is caught all the same."""
    _append(_copy(tmp_path) / "launch" / "settlement.py",
            "def _late():\n    import sqlalchemy  # outside the schema")
    res = _lint(tmp_path)
    assert res.returncode != 0, res.stdout
    assert "only the schema imports SQLAlchemy or Alembic BROKEN" in res.stdout
    assert "ledger.launch.settlement -> sqlalchemy" in res.stdout


def test_a_module_in_no_layer_breaks_the_contract(tmp_path):
    (_copy(tmp_path) / "loose.py").write_text('"""In no layer."""\n')
    res = _lint(tmp_path)
    assert res.returncode != 0, res.stdout
    assert "ledger.loose" in res.stdout
