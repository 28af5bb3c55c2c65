"""Every command's `--help` at 80 columns reads as written (issue 34): no docstring line
break survives Rich's re-wrap (no line that ends far short of the width followed by a
continuation that would have fit), one style (`ledger run` too), metavars a person reads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from ledger.cli.typer_app import COMPARE_NAME, app

REPO = Path(__file__).resolve().parent.parent
WIDTH = 80


def _commands(cmd=None, path=()):
    cmd = cmd or typer.main.get_command(app)
    yield list(path)
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


# `ledger report compare` is registered hidden as `report-compare` (typer_app.COMPARE_NAME):
# its help is checked where a user asks for it
COMMANDS = [["report", "compare"] if p == [COMPARE_NAME] else p for p in _commands()]


def _help(path: list[str]) -> str:
    res = CliRunner().invoke(app, [*path, "--help"], terminal_width=WIDTH)
    assert res.exit_code == 0, res.output
    return res.output


TYPER_NOTES = ("[default:", "[env var:", "[required]")


def ragged(text: str, width: int = WIDTH) -> list[str]:
    """Lines that end short although the next line's first word would have fit after them:
    prose outside the panels (one space of padding each side), and a panel's last column on
    its continuation rows (the rows whose first columns are blank)."""
    lines = text.splitlines()
    out = []
    for a, b in zip(lines, lines[1:]):
        if a.startswith("│") and b.startswith("│"):
            ia, ib = a[1:-1], b[1:-1]
            start = len(ib) - len(ib.lstrip())
            if not ib.strip() or start < 6 or ib.lstrip().startswith(TYPER_NOTES):
                continue  # (a new row, not a continuation; Typer's own `[default: ...]` line)
            seg = ia[start:].rstrip()
            if not seg or ia[start - 1] != " ":
                continue
            if len(seg) + 1 + len(ib.split()[0]) <= len(ia) - 1 - start:  # (one cell of right padding)
                out.append(f"{a!r} / {b!r}")
        elif not a.startswith(("│", "╭", "╰")) and not b.startswith(("│", "╭", "╰")):
            if a.strip() and b.strip() and a.startswith(" ") and b.startswith(" ") and not b.lstrip().startswith(("-", "*")):
                if len(a.rstrip()) + 1 + len(b.split()[0]) <= width - 1:
                    out.append(f"{a!r} / {b!r}")
    return out


def test_the_ragged_check_finds_a_kept_line_break():
    prose = (" Read from the index (brought up to date with the records first). A run belongs\n"
             " to the\n bucket of its start time.\n")
    assert ragged(prose) == [f"{' to the'!r} / {' bucket of its start time.'!r}"]
    panel = ("│ --since   WHEN  From this day                                              │\n"
             "│                 2026-03-01T09:00.                                         │\n")
    assert ragged(panel)
    fine = ("│ --since   WHEN  From this day or time, in --tz: 2026-03-01, 2026-03-01T09:00,│\n"
            "│                 today.                                                    │\n")
    assert not ragged(fine)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(["ledger", *p]))
def test_help_at_80_columns_has_no_ragged_lines(path):
    text = _help(path)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert ragged(text) == [], text


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(["ledger", *p]))
def test_help_metavars_read_as_words(path):
    text = _help(path)
    for junk in ("<str>", "<list[", "<int", "<float", "<path", "<bool>", "[x>=", "range>", "{"):
        assert junk not in text, (junk, text)
    usage = next(line for line in text.splitlines() if "Usage:" in line).strip()
    assert re.fullmatch(r"Usage: ledger[a-z ]* \[OPTIONS\]( \[?[A-Z]+\]?(\.\.\.)?| -- CMD \[ARGS\.\.\.\]| COMMAND \[ARGS\]\.\.\.)*",
                        usage), usage  # (an argument as Click names it: QUERY, [KIND])


def test_run_help_is_in_the_style_of_every_other_command():
    text = _help(["run"])
    assert "╭─ Options " in text and "Usage: ledger run [OPTIONS] -- CMD [ARGS...]" in text
    from ledger.cli.run_cmd import _OPTIONS

    for opt in _OPTIONS:  # every option parse_run_args reads is documented
        assert f"│ {opt} " in text, opt
    # the real process (the fast path hands --help to Typer): the same text
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": str(WIDTH), "TERM": "dumb", "NO_COLOR": "1"}
    p = subprocess.run([sys.executable, "-m", "ledger", "run", "--help"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and "╭─ Options " in p.stdout and ragged(p.stdout) == []


def _ledger(*argv: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    return subprocess.run([sys.executable, "-m", "ledger", *argv], env=full, capture_output=True, text=True,
                          timeout=120)


def test_shell_completion_installs_for_bash(tmp_path):
    home = tmp_path / "user"
    home.mkdir()
    p = _ledger("--install-completion", HOME=str(home), SHELL="/bin/bash")
    assert p.returncode == 0, p.stderr
    script = home / ".bash_completions" / "ledger.sh"
    assert f"bash completion installed in {script}" in p.stdout
    assert "_LEDGER_COMPLETE=complete_bash" in script.read_text()
    assert f"source '{script}'" in (home / ".bashrc").read_text()
    # what the installed function asks ledger: the commands and options that match
    p = _ledger(COMP_WORDS="ledger rep", COMP_CWORD="1", _LEDGER_COMPLETE="complete_bash")
    assert p.stdout.split() == ["replay", "report"]
    p = _ledger(COMP_WORDS="ledger repo", COMP_CWORD="1", _LEDGER_COMPLETE="complete_bash")
    assert p.stdout.split() == ["report"]
    p = _ledger(COMP_WORDS="ledger runs --un", COMP_CWORD="2", _LEDGER_COMPLETE="complete_bash")
    assert p.stdout.split() == ["--until"]


def test_db_current_on_a_missing_index_says_so(tmp_path):
    from ledger.index import db as dbmod

    home = tmp_path / "home"
    p = _ledger("db", "current", "--home", str(home))
    assert p.returncode == 0, p.stderr
    assert p.stdout == (f"no index at sqlite:///{home}/index.sqlite yet (this ledger's schema is {dbmod.HEAD}; "
                        "`ledger index` creates it)\n")
    assert _ledger("db", "upgrade", "--home", str(home)).returncode == 0
    assert _ledger("db", "current", "--home", str(home)).stdout == (
        f"{dbmod.HEAD} (the newest revision this ledger knows)\n")


def test_help_imports_neither_markdown_nor_pygments():
    # issue 28: typer.rich_utils imports rich.markdown (markdown-it) and rich.traceback (pygments)
    # for what ledger never does; `ledger --help` is the same without them (tests above), and
    # the real modules are what a later import finds
    probe = ("import sys; sys.argv = ['ledger', '--help']\n"
             "from ledger.cli.app import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('markdown_it', 'pygments'))\n"
             "import rich.markdown, rich.traceback, typer.rich_utils\n"
             "print('HEAVY', heavy, rich.markdown.Markdown.__module__, typer.rich_utils.Markdown('x').__class__.__module__,"
             " hasattr(typer.rich_utils.Traceback, 'from_exception'))\n")
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    assert "Usage: ledger" in p.stdout
    assert p.stdout.rsplit("HEAVY ", 1)[1].split() == ["[]", "rich.markdown", "rich.markdown", "True"]
