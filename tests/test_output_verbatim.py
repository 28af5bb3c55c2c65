"""Data is printed exactly as stored (issue 17 item 2).

What an agent or a provider wrote (final answers, subjects, model, cwd, host, tool names) and
what a query returns is shown, never obeyed: Rich markup and emoji codes stay literal text,
terminal control characters and bidi overrides are shown escaped, in every table, in
`ledger show` and in messages on stderr.
"""

from __future__ import annotations

import os
import time
import unicodedata
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

import recordkit as rk

# The hostile text, and how it must be printed: markup and emoji codes literal, every control
# or format character written as an escape (a literal here, not computed by the code under test).
HOSTILE = ("[/] [bold red]x[/] :x: [link=https://evil.example]click[/link] "
           "\x1b[31mred\x1b[0m \x1b]8;;https://e.x\x07 a\rb \u202eevil")
SHOWN = (r"[/] [bold red]x[/] :x: [link=https://evil.example]click[/link] "
         r"\x1b[31mred\x1b[0m \x1b]8;;https://e.x\x07 a\rb \u202eevil")
LITERAL = ("[/]", "[bold red]x[/]", ":x:", "[link=https://evil.example]click[/link]")
EMOJI_X = "\u274c"  # what Rich makes of `:x:`


def invoke(*args: str, env: dict[str, str] | None = None):
    from ledger.cli.app import app

    return CliRunner().invoke(app, list(args), env=env)


@pytest.fixture
def hostile(home, monkeypatch):
    """A home with one run whose every free-text field carries HOSTILE (a usage stream's model
    too); its run id."""
    monkeypatch.setenv("COLUMNS", "2000")  # wide: no cell is cut or folded, substrings stay whole
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    events = rk.golden_events() + [
        rk.envelope(9, "tool_use", name="tool" + HOSTILE),
        rk.envelope(10, "conversation", event={"type": "item_completed", "turn_id": "t1", "item": {
            "text": "answer line1\n" + HOSTILE, "phase": "final_answer"}}),
        rk.envelope(11, "conversation", event={"type": "turn_completed", "turn_id": "t1", "status": "completed"}),
        rk.usage(12, "attempt-3/turn-2/m", 1, {"input_tokens": 1, "output_tokens": 1}, model="model" + HOSTILE),
    ]
    d = rk.write_record(home, events=events, term=rk.terminal(), model="model" + HOSTILE, cwd="/cwd" + HOSTILE,
                    host="host" + HOSTILE, subjects=[{"selector": "task:" + HOSTILE, "source": "declared"}])
    return d.name


def assert_clean(text: str, *, newlines: bool = True) -> None:
    """Nothing in `text` can steer the terminal: no control character but newline, no format
    character (bidi overrides), no emoji made from `:x:`."""
    assert "Traceback" not in text
    assert EMOJI_X not in text
    bad = [c for c in text if unicodedata.category(c) in ("Cc", "Cf") and not (newlines and c == "\n")]
    assert not bad, bad


def assert_verbatim(res, *expected: str) -> None:
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert_clean(res.stdout)
    for piece in LITERAL:
        assert piece in res.stdout
    for e in expected:
        assert e in res.stdout, (e, res.stdout)


def test_runs_table_prints_subjects_and_model_verbatim(hostile):
    res = invoke("runs", "--all")
    assert_verbatim(res, "task:" + SHOWN, "model" + SHOWN)


def test_show_prints_every_value_verbatim_and_keeps_the_final_answer_lines(hostile):
    res = invoke("show", hostile)
    assert_verbatim(res, "model: model" + SHOWN, "host: host" + SHOWN, "cwd: /cwd" + SHOWN,
                    "subjects: task:" + SHOWN, "final answer:\nanswer line1\n" + SHOWN)


def test_show_events_prints_each_event_as_one_escaped_line(hostile):
    res = invoke("show", hostile, "--events")
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert_clean(res.stdout)
    tool = [line for line in res.stdout.splitlines() if '"type":"tool_use"' in line]
    assert len(tool) == 1
    # JSON escapes ESC and BEL itself; the bidi override (valid in JSON as is) is escaped for the terminal
    assert '"name":"tool[/] [bold red]x[/] :x: [link=https://evil.example]click[/link] ' in tool[0]
    assert r"\u001b[31mred" in tool[0] and r"\u202eevil" in tool[0]


def test_sql_prints_values_and_column_names_verbatim(hostile, db_url):
    # `[/]` in a value was a MarkupError traceback; a column name is data too
    res = invoke("sql", "--db", db_url, 'SELECT model, final_answer AS "[/] :x: answer", cwd, host FROM runs_v')
    assert_verbatim(res, "model" + SHOWN, "answer line1\\n" + SHOWN, "/cwd" + SHOWN, "host" + SHOWN,
                    "[/] :x: answer")
    res = invoke("sql", "--db", db_url, "SELECT tool_name FROM tool_uses_v")
    assert_verbatim(res, "tool" + SHOWN)


@pytest.mark.parametrize("kind,label", [("model", "model"), ("subject", "task:"), ("host", "host")])
def test_report_group_labels_verbatim(hostile, kind, label):
    res = invoke("report", kind)
    assert_verbatim(res, label + SHOWN)


def test_report_run_and_breakdown_print_model_names_verbatim(hostile):
    res = invoke("report", "run")
    assert_verbatim(res, "model" + SHOWN)
    res = invoke("report", "subject", "--breakdown")
    assert_verbatim(res, "task:" + SHOWN, "└ model" + SHOWN)


@pytest.mark.parametrize("args", [("runs", "--all"), ("show", "{id}"), ("sql", "SELECT * FROM runs_v"),
                                  ("report", "model"), ("report", "subject", "--breakdown"), ("report", "run")])
def test_narrow_terminal_cuts_data_but_never_lets_it_through(hostile, monkeypatch, args):
    monkeypatch.setenv("COLUMNS", "80")
    res = invoke(*[a.replace("{id}", hostile) for a in args])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert_clean(res.stdout)
    assert_clean(res.stderr)


@pytest.mark.parametrize("args", [("runs", "--all"), ("show", "{id}"), ("sql", "SELECT * FROM runs_v"),
                                  ("report", "subject", "--breakdown")])
def test_on_a_colour_terminal_data_adds_no_style_link_or_control(hostile, args):
    """With colours on, ledger's own styles are escape sequences; the data's must not be."""
    res = invoke(*[a.replace("{id}", hostile) for a in args], env={"FORCE_COLOR": "1", "TERM": "xterm-256color"})
    assert res.exit_code == 0, (res.stdout, res.stderr)
    out = res.stdout
    assert "\x1b[" in out  # the terminal is really treated as one (ledger's own bold/dim)
    assert "\x1b]8;" not in out  # no OSC-8 hyperlink, from markup or from the raw sequence
    assert "\x07" not in out and "\r" not in out and "\u202e" not in out
    assert "\x1b[31m" not in out and "31m" not in out.replace(r"\x1b[31m", "")  # no red, raw or from [bold red]
    assert EMOJI_X not in out
    assert SHOWN in out or "task:" + SHOWN in out or "model" + SHOWN in out


def test_error_messages_escape_what_the_user_or_a_record_wrote(hostile):
    res = invoke("show", "zz\x1b]8;;https://e.x\x07q\u202e")
    assert res.exit_code == 1
    assert "Error:" in res.stderr
    assert r"zz\x1b]8;;https://e.x\x07q\u202e" in res.stderr
    assert_clean(res.stderr)


def test_api_retry_line_of_ledger_run_escapes_the_providers_words():
    from ledger.launch.progress import Progress

    r, w = os.pipe()
    try:
        p = Progress(enabled=True, tty=False, fd=w)
        stats = SimpleNamespace(api_retries=1, retry_log=["529 \x1b]8;;https://e.x\x07overloaded\x1b[2J"],
                                last_event_at=time.monotonic(), model_calls=0, tool_calls=0)
        p.update(stats, lambda: ({}, None, None), force=True)
        os.close(w)
        w = -1
        out = os.read(r, 65536).decode()
    finally:
        os.close(r)
        if w != -1:
            os.close(w)
    assert r"API retry #1 (529 \x1b]8;;https://e.x\x07overloaded\x1b[2J)" in out
    assert_clean(out)


# ---------------------------------------------------------------------------------------
# the rule itself


@pytest.mark.parametrize("raw,single,multi", [
    ("plain text, [b]markup[/b] :x: é 日本 \\ \u00a0", "plain text, [b]markup[/b] :x: é 日本 \\ \u00a0", None),
    ("a\tb\nc\rd", r"a\tb\nc\rd", "a\tb\nc\\rd"),
    ("\x00\x07\x08\x1b\x7f\x85\x9b", r"\x00\x07\x08\x1b\x7f\x85\x9b", None),
    ("\u202a\u202e\u2066\u2069\u200e\u200f\u061c\u200b\ufeff\u00ad", r"\u202a\u202e\u2066\u2069\u200e\u200f\u061c\u200b\ufeff\xad", None),
    ("\u2028\u2029", r"\u2028\u2029", None),
    ("\U000e0001", r"\U000e0001", None),  # a tag character (format, outside the BMP)
    ("bad\udcffbyte", r"bad\udcffbyte", None),  # a path byte that is not UTF-8 (surrogateescape)
    ("👩\u200d💻 می\u200cخواهم", "👩\u200d💻 می\u200cخواهم", None),  # joiners kept: emoji and scripts need them
])
def test_plain_escapes_controls_and_format_characters(raw, single, multi):
    from ledger.text import plain

    assert plain(raw) == single
    assert plain(raw, multiline=True) == (single if multi is None else multi)


def test_plain_and_shown_take_any_value():
    from ledger.text import plain, shown

    assert plain(None) == "" and plain(12) == "12" and plain(0.25) == "0.25"
    t = shown("[bold]x[/] :x:", style="bold")
    assert t.plain == "[bold]x[/] :x:" and not t.spans and t.style == "bold"


@pytest.mark.parametrize("args", [("show", "RUN"), ("show", "RUN", "--events"), ("runs", "--all"),
                                  ("sql", "SELECT model, final_answer, cwd FROM runs_v")], ids=" ".join)
def test_to_a_pipe_the_same_bytes_without_richs_console(hostile, args):
    # issue 28: to a pipe (no styles) `show` and the tables are written without Rich's console;
    # the real process writes what Rich's console writes (the test runner's swapped stream)
    import subprocess
    import sys

    from conftest import REPO

    argv = [a.replace("RUN", hostile) for a in args]
    real = subprocess.run([sys.executable, "-m", "ledger", *argv], capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    res = invoke(*argv)
    assert (real.returncode, real.stdout.decode()) == (res.exit_code, res.stdout)
