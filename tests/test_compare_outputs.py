"""scripts/compare_outputs.py, issue 27's safety net: two captures by the same code of the same
generated home (two generations from one seed) are byte-identical (SQLite and PostgreSQL), a changed output is named and
fails the comparison, and two generations from the same seed are the same home."""

from __future__ import annotations

import importlib.util
import os

import pytest

from conftest import REPO

spec = importlib.util.spec_from_file_location("compare_outputs", REPO / "scripts" / "compare_outputs.py")
co = importlib.util.module_from_spec(spec)
spec.loader.exec_module(co)

# a few outputs of each family (the whole list takes minutes): records, sessions, show, sql
SELECT = (r"^(runs --all json|report daily json|report session csv|report blocks table|show .* json|sql json"
          r"|verify --json)$")


def _pg_up() -> bool:
    try:
        co._pg_drop("ledger_cmp_probe")
        return True
    except Exception:  # noqa: BLE001 - any connection failure
        if os.environ.get("CI"):
            raise
        return False


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    h = tmp_path_factory.mktemp("cmp") / "home"
    co.generate(h, runs=10, sessions=2, threads=2, seed=5)
    return h


@pytest.fixture(scope="module")
def again(tmp_path_factory):
    h = tmp_path_factory.mktemp("cmp") / "home"
    co.generate(h, runs=10, sessions=2, threads=2, seed=5)
    return h


def _files(d):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_two_generations_are_the_same_home(home, again):
    runs = _files(home / "runs")
    assert runs and runs == _files(again / "runs")
    # the archive's own state (sources/<client>/.state) names where and when it imported from
    assert _files(home / "sources").keys() == _files(again / "sources").keys()


def test_same_code_twice_is_identical_and_a_change_is_caught(home, again, tmp_path, capsys):
    backends = "sqlite,postgresql" if _pg_up() else "sqlite"
    for side, h in (("a", home), ("b", again)):
        assert co.main(["--home", str(h), "--out", str(tmp_path / side), "--backends", backends,
                        "--select", SELECT]) == 0
    a, b = tmp_path / "a", tmp_path / "b"
    names = sorted(p.name for p in (a / "sqlite").iterdir())
    assert len(names) == 2 * 15  # the cold index, 6 selected outputs and `show` of 8 of the 10 runs
    assert (a / "sqlite" / "000-index---json.out").read_bytes().count(b"$HOME") >= 1  # masked
    capsys.readouterr()
    assert co.main(["--compare", str(a), str(b)]) == 0
    # a deliberately changed output: one digit of the daily report
    victim = next((b / "sqlite").glob("*-report-daily-json.out"))
    data = victim.read_bytes()
    i = next(k for k, ch in enumerate(data) if chr(ch).isdigit())
    victim.write_bytes(data[:i] + (b"1" if data[i:i + 1] != b"1" else b"2") + data[i + 1:])
    assert co.main(["--compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert f"DIFFERS: sqlite/{victim.name}" in out and out.count("DIFFERS") == 1
    # and a missing output is a difference too
    victim.unlink()
    assert co.main(["--compare", str(a), str(b)]) == 1
    assert f"only in {a}: sqlite/{victim.name}" in capsys.readouterr().out
