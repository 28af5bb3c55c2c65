"""The fast path without Typer (ledger/cli/params.py, fastpath.py; issue 15: a warm report 10x
faster than ccusage, Typer's import being ~30 ms of it): what the fast parser reads from the
commands' declarations is what Typer builds from them, option for option, and a warm
`ledger report` / `runs` / `show` / `index` / `import` imports neither Typer nor the ORM."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import claudehistory
from conftest import REPO
from indexhelpers import make_run
from ledger.cli import fastpath


def _kind(k) -> str:
    if k is bool:
        return "flag"
    if getattr(k, "__origin__", None) is list:
        return f"list[{_kind(k.__args__[0])}]"
    return {str: "str", int: "int", float: "float", Path: "path"}[k]


def _fast_view(command: str) -> dict:
    """{option: (parameter, kind, min, max, default, envvar)} and the argument, as fastpath reads them."""
    import importlib

    module, name = fastpath.COMMANDS[command]
    fn = getattr(importlib.import_module(module), name).__wrapped__
    opts, positional = fastpath._spec(fn)
    params = inspect.signature(fn).parameters
    out = {d: (p, _kind(k), info.kw.get("min"), info.kw.get("max"), params[p].default, info.kw.get("envvar"))
           for d, (p, k, info) in opts.items()}
    arg = None
    if positional is not None:
        default = params[positional].default
        arg = (positional, None if default is inspect.Parameter.empty else default,
               default is inspect.Parameter.empty)
    return {"options": out, "argument": arg}


def _typer_view(command: str) -> dict:
    """The same, read from the Click command Typer builds for `ledger COMMAND`."""
    from typer.main import get_command

    from ledger.cli.app import app

    cmd = get_command(app).commands[command]
    out, arg = {}, None
    for p in cmd.params:
        if p.param_type_name == "argument":
            assert arg is None
            arg = (p.name, p.default, p.required)
            continue
        assert not p.secondary_opts and not p.callback, p.name
        kind = _kind(p.type_descriptor.annotation)
        assert p.is_flag == (kind == "flag") and p.multiple == kind.startswith("list["), p.name
        for d in p.opts:
            out[d] = (p.name, kind, p.min, p.max, p.default, p.envvar)
    return {"options": out, "argument": arg}


@pytest.mark.parametrize("command", sorted(fastpath.COMMANDS))
def test_the_fast_spec_is_what_typer_sees(command):
    fast, typer_ = _fast_view(command), _typer_view(command)
    assert fast["options"], command  # (an empty spec would send every call to Typer)
    assert fast == typer_


def test_typer_reads_the_declarations_it_is_given():
    # for_typer hands Typer its own infos, with every keyword of the declaration
    import typer

    from ledger.cli.params import Option, for_typer
    from ledger.cli.report_cmd import report

    converted = inspect.signature(for_typer(report)).parameters["limit"].annotation
    info = converted.__metadata__[0]
    assert isinstance(info, typer.models.OptionInfo)
    assert (info.default, info.min, info.show_default) == ("--limit", 0, False)
    # the command itself keeps ledger's declaration (the fast path reads it)
    original = inspect.signature(report, eval_str=True).parameters["limit"].annotation.__metadata__[0]
    assert type(original) is type(Option()) and original.kw["min"] == 0


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    base = tmp_path_factory.mktemp("notyper")
    claudehistory.generate(base / "claude", sessions=4, seed=7)
    run = make_run(base / "home", subjects=("task:1",))
    env = {**os.environ, "LEDGER_HOME": str(base / "home"), "PYTHONPATH": str(REPO), "COLUMNS": "160",
           "LEDGER_NO_FAST_EXIT": "1"}  # (so that the atexit hook below runs)
    env.pop("LEDGER_DB", None)
    # (the first pass after the report's own seals the shard: the commands below find nothing new)
    for argv in (["import", "claude", "--from", str(base / "claude")], ["report", "daily", "--json"], ["index"]):
        subprocess.run([sys.executable, "-m", "ledger", *argv], env=env, check=True, capture_output=True)
    return env, run.name, base / "claude"


PROBE = ("import atexit, json, sys\n"
         "atexit.register(lambda: sys.__stderr__.write('\\nMODULES ' + json.dumps(sorted(sys.modules)) + '\\n'))\n"
         "sys.argv = ['ledger', *sys.argv[1:]]\n"
         "from ledger.cli.app import main\n"
         "main()\n")


def _modules(env: dict, *argv: str) -> tuple[set[str], subprocess.CompletedProcess]:
    p = subprocess.run([sys.executable, "-c", PROBE, *argv], env=env, capture_output=True)
    line = p.stderr.decode().rsplit("\nMODULES ", 1)[1]
    return set(json.loads(line)), p


# (importlib.metadata and the email parser it loads: ~70 M instructions, for genai-prices' version)
HEAVY = ("typer", "pydantic", "sqlalchemy", "alembic", "importlib.metadata", "email")


@pytest.mark.parametrize("argv", [
    ["report", "daily", "--tz", "UTC", "--json"], ["report", "model"], ["runs", "--json"], ["runs"],
    ["show", "RUN"], ["index", "--json"], ["import", "claude", "--from", "CFG", "--json"],
    ["report", "session", "--project", "*a*", "--json"], ["runs", "--project", "*", "--json"],
    ["sql", "select count(*) from runs_v"], ["--version"],
], ids=" ".join)
def test_a_warm_fast_path_command_imports_no_typer_nor_orm(warm, argv):
    env, run, cfg = warm
    argv = [a.replace("RUN", run).replace("CFG", str(cfg)) for a in argv]
    mods, p = _modules(env, *argv)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert p.stdout.strip()
    assert not [m for m in mods if m in HEAVY or m.split(".")[0] in HEAVY], argv
    # and lint-imports' warm-path contract names every ledger module it loads (pyproject.toml)
    assert sorted(m for m in mods if m.split(".")[0] == "ledger" and m not in WARM_CONTRACT) == [], argv


def _warm_contract() -> frozenset[str]:
    import tomllib

    with open(REPO / "pyproject.toml", "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (warm,) = [c for c in contracts if c["name"].startswith("the warm path imports no")]
    return frozenset(warm["source_modules"])


WARM_CONTRACT = _warm_contract()


# what a warm `report --tz UTC --json` does without (issue 15), M instructions at import: hashlib
# (OpenSSL) 11, zoneinfo 12, orjson 2 and the uuid (with platform) 10 it loads, decimal 5
# (ledger.price_rates), csv 2, dataclasses with inspect 28 (ledger.index.db's statuses, the fast
# parser's default check).
LEAN = ("hashlib", "_hashlib", "zoneinfo", "orjson", "uuid", "platform", "decimal", "csv", "ledger.price_rates",
        "dataclasses", "inspect")


@pytest.fixture(scope="module")
def settled(tmp_path_factory, warm):
    """The warm home with a history whose directories are older than the archive's racy window
    (Tree.RACY_NS): its refresh reads the quick file, as on a real history."""
    env, _run, _cfg = warm
    base = tmp_path_factory.mktemp("lean")
    cfg = base / "claude"
    claudehistory.generate(cfg, sessions=6, seed=8)
    past = time.time() - 3600
    for root, dirs, files in os.walk(cfg, topdown=False):
        for name in files + dirs:
            os.utime(os.path.join(root, name), (past, past))
    os.utime(cfg, (past, past))
    env = {**env, "LEDGER_HOME": str(base / "home")}
    make_run(base / "home", subjects=("task:2",))
    for argv in (["import", "claude", "--from", str(cfg)], ["report", "daily", "--json"], ["index"]):
        subprocess.run([sys.executable, "-m", "ledger", *argv], env=env, check=True, capture_output=True)
    assert (base / "home" / "sources" / "claude" / ".state" / "quick.bin").exists()
    return env


def test_a_warm_report_imports_only_what_it_uses(settled):
    mods, p = _modules(settled, "report", "daily", "--tz", "UTC", "--json")
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert json.loads(p.stdout)["rows"]
    assert not [m for m in LEAN if m in mods]
    assert (Path(settled["LEDGER_HOME"]) / "home-id.json").exists()  # (its id is read without uuid)


def test_a_warm_report_by_project_imports_only_what_it_uses_too(settled):
    mods, p = _modules(settled, "report", "daily", "--tz", "UTC", "--project", "*", "--json")
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    assert json.loads(p.stdout)["rows"]  # (the imported sessions' projects: all of them)
    assert not [m for m in LEAN if m in mods]


def test_a_usage_mistake_still_imports_typer_to_say_it(warm):
    env, _run, _cfg = warm
    mods, p = _modules(env, "report", "--json", "--csv")  # (found by the command, said as Typer says it)
    assert (p.returncode, p.stderr.decode().split("\nMODULES")[0]) == (
        2, "Error: --json and --csv cannot be used together\nHint: run `ledger report --help`\n")
    assert "typer" in mods


def test_the_warm_path_shortcuts_answer_as_what_they_replace(monkeypatch):
    import hashlib
    import socket
    from importlib.metadata import version

    from ledger import pricing
    from ledger.home import machine_id

    pricing.price_data_version.cache_clear()
    assert pricing.price_data_version() == f"genai-prices {version('genai-prices')}"
    for name in ("genai_prices", "orjson", "zstandard", "typer"):
        assert pricing._dist_info_version(name) == version(name), name
    assert pricing._dist_info_version("no_such_package_here") is None
    try:
        mid = open("/etc/machine-id", "rb").read(256).strip()
    except OSError:
        mid = b""
    monkeypatch.delenv("LEDGER_MACHINE_ID", raising=False)
    assert machine_id() == hashlib.sha256(mid + b"\0" + socket.gethostname().encode()).hexdigest()[:16]
