"""The package layers (DESIGN §6) are enforced by import-linter, contract in pyproject.toml."""

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
    assert "1 kept, 0 broken" in res.stdout


def test_a_back_edge_breaks_the_contract(tmp_path):
    """A deliberately added back-edge (records importing the CLI) is caught."""
    shutil.copytree(REPO / "ledger", tmp_path / "ledger", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    ids = tmp_path / "ledger" / "records" / "ids.py"
    ids.write_text(ids.read_text() + "\nimport ledger.cli.common  # a back-edge\n")
    res = _lint(tmp_path)
    assert res.returncode != 0, res.stdout
    assert "ledger.records is not allowed to import ledger.cli" in res.stdout
