"""The harness registry (ledger.launch.adapters.REGISTRY) is the one list of harnesses: the
runner, `ledger run`'s choices and help, and detection read it; a new harness is one adapter
module plus one registry line; the registry imports no adapter."""

from __future__ import annotations

import shutil
import subprocess
import sys

from typer.testing import CliRunner

from conftest import REPO
from ledger.cli.app import app
from ledger.cli.run_cmd import HARNESS_CHOICES
from ledger.launch.adapters import COMMAND, HARNESSES, REGISTRY, adapter_class, detect_harness, harness_spec


def test_every_registered_harness_has_its_adapter():
    assert HARNESSES[-1] == COMMAND and len(set(HARNESSES)) == len(HARNESSES)
    for spec in REGISTRY:
        cls = adapter_class(spec.name)
        assert cls.harness == spec.name
        assert harness_spec(spec.name) is spec
        for exe in spec.executables:
            assert detect_harness([exe, "-p", "x"]) == spec.name
        # an agent says how to ask it for its stream; the plain command has none to ask for
        assert bool(spec.stream_hint) == cls.parses_stream


def test_cli_choices_and_help_come_from_the_registry():
    assert HARNESS_CHOICES == ("auto", *HARNESSES)
    res = CliRunner().invoke(app, ["run", "--help"], terminal_width=200)
    assert res.exit_code == 0
    assert "--harness" in res.output and "|".join(HARNESS_CHOICES) in res.output
    for spec in REGISTRY:
        assert spec.label in res.output


def test_the_registry_imports_no_adapter():
    code = ("import sys, ledger.launch.adapters as a; "
            "print(sorted(m for m in sys.modules if m.startswith('ledger.launch.adapters.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


ACME = '''
from ledger.launch.adapters.base import Adapter, option_value


class AcmeAdapter(Adapter):
    harness = "acme"
    provider = "acme-ai"
    terminal_types = ("done",)
    value_options = frozenset({"--model"})

    @classmethod
    def stream_format_ok(cls, argv):
        return "--jsonl" in argv

    @classmethod
    def model_from_argv(cls, argv):
        return option_value(argv, ("--model",))
'''


def test_a_new_harness_is_one_module_and_one_registry_line(tmp_path):
    shutil.copytree(REPO / "ledger", tmp_path / "ledger", ignore=shutil.ignore_patterns("__pycache__"))
    pkg = tmp_path / "ledger" / "launch" / "adapters"
    (pkg / "acme.py").write_text(ACME)
    init = pkg / "__init__.py"
    anchor = "    HarnessSpec(COMMAND,"
    text = init.read_text()
    assert text.count(anchor) == 1
    init.write_text(text.replace(anchor, '    HarnessSpec("acme", "acme", "AcmeAdapter", "Acme", ("acme",), "--jsonl"),\n'
                                 + anchor))
    code = """
from typer.testing import CliRunner
from ledger.cli.app import app
from ledger.launch.adapters import detect_harness, model_from_argv, prompt_from_argv, stream_format_ok
from ledger.launch.runner import Launcher, RunOptions
assert detect_harness(["/usr/bin/acme", "go"]) == "acme"
assert stream_format_ok("acme", ["acme", "--jsonl"]) and not stream_format_ok("acme", ["acme"])
assert model_from_argv("acme", ["acme", "--model", "a-1", "fix it"]) == "a-1"
assert prompt_from_argv("acme", ["acme", "--model", "a-1", "fix it"]) == (None, "fix it")
l = Launcher(RunOptions(argv=["acme", "--jsonl", "--model", "a-1", "x"], home="/nonexistent"))
assert (l.harness, l.reader, l.model) == ("acme", "acme", "a-1")
l = Launcher(RunOptions(argv=["acme", "x"], home="/nonexistent"))
assert (l.harness, l.reader) == ("acme", "command")
res = CliRunner().invoke(app, ["run", "--help"], terminal_width=200)
assert "auto|claude|codex|gemini|acme|command" in res.output and "Acme" in res.output, res.output
res = CliRunner().invoke(app, ["report", "--help"], terminal_width=200)
assert "acme" in res.output, res.output
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr
