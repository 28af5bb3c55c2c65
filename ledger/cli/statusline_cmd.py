"""`ledger statusline`: Claude Code's status line from the index (ledger.report.statusline).

Thin layer. The plain command never fails: a status line must not break the TUI, so a bad
stdin or any failure prints a short placeholder and exits 0. `--install` / `--uninstall`
edit `statusLine` in the user's Claude settings after showing the change.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

from ledger.cli.common import DbOpt, HomeOpt, handle_errors
from ledger.cli.params import Option


def _quiet(_msg: str) -> None:
    pass


def line(raw: bytes, home: Path | None, db: str | None) -> str:
    """The status line for one stdin document (never raises)."""
    from ledger.report.statusline import PLACEHOLDER, parse_input, render

    doc = parse_input(raw)
    if doc is None:
        return PLACEHOLDER
    figs = None
    try:
        figs = _figures(doc, home, db)
    except Exception:  # noqa: BLE001 - the line says what it can without the index
        figs = None
    try:
        return render(doc, figs)
    except Exception:  # noqa: BLE001
        return PLACEHOLDER


def _figures(doc: dict[str, Any], home: Path | None, db: str | None) -> dict[str, Any]:
    from ledger.home import home_named, resolve_home
    from ledger.report.blocks import now_s
    from ledger.report.service import answer
    from ledger.report.statusline import config_root, figures, keep_sample

    now = now_s()
    home_path = resolve_home(home)
    transcript = doc.get("transcript_path") if isinstance(doc.get("transcript_path"), str) else None
    _archive_root(home_path, config_root(transcript))
    keep_sample(home_path, doc, now)
    sid = doc.get("session_id") if isinstance(doc.get("session_id"), str) else None
    # only this session's logs are brought up to date (an lstat of every imported log was
    # half of a line's work on a 2,000-session history); other sessions' new bytes come with
    # their own status lines or the next reader. No transcript: every log, as readers do.
    only = [os.path.abspath(transcript)] if transcript else None
    # (answer: the report's snapshot without its query module; damaged records are not the line's to say)
    return answer(home_path, db, lambda c: figures(c, sid, now), notify=_quiet, named=home_named(home),
                  refresh_only=only)[0]


def _archive_root(home: Path, root: Path | None) -> None:
    """The transcript's config dir becomes one the readers' refresh archives (ledger import's
    roots); the reader's own refresh (ledger.index.ops) then archives its new bytes."""
    if root is None:
        return
    from ledger.sources.archive import import_client
    from ledger.sources.archivestate import imported_roots
    from ledger.sources.logdirs import CLIENTS, has_logs_dir

    client = CLIENTS["claude"]
    root = Path(root).resolve()
    if str(root) in imported_roots(home, client) or not has_logs_dir(client, root):
        return
    try:
        import_client(home, client, [root], busy_ok=True)
    except BlockingIOError:  # (an importer at work: the next line counts it)
        pass


def settings_path() -> Path:
    import os

    base = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(base) / "settings.json" if base else Path.home() / ".claude" / "settings.json"


def _command(home: Path | None, db: str | None) -> str:
    import shlex
    import shutil

    exe = shutil.which("ledger")
    argv = [exe] if exe else [sys.executable, "-m", "ledger"]
    argv.append("statusline")
    if home is not None:
        argv += ["--home", str(Path(home).resolve())]
    if db is not None:
        argv += ["--db", db]
    return " ".join(shlex.quote(a) for a in argv)


def _edit(install: bool, uninstall: bool, yes: bool, home: Path | None, db: str | None) -> None:
    import json
    import os

    from ledger.errors import LedgerError

    path = settings_path()
    try:
        current = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError) as exc:
        raise LedgerError(f"cannot read {path}: {exc}", "fix or move the file, then run `ledger statusline --install` again") from None
    if not isinstance(current, dict):
        raise LedgerError(f"{path} is not a JSON object", "fix or move the file, then run `ledger statusline --install` again")
    before = current.get("statusLine")
    after = {"type": "command", "command": _command(home, db), "padding": 0} if install else None
    if before == after:
        print(f"{path}: statusLine is already {'set' if install else 'absent'}; nothing to change")
        return
    print(f"{path}:")
    print(f"  statusLine now: {json.dumps(before) if before is not None else '(none)'}")
    print(f"  statusLine new: {json.dumps(after) if after is not None else '(none)'}")
    if not yes:
        if not sys.stdin.isatty():
            raise LedgerError("not changed: no terminal to confirm on", "run `ledger statusline --install --yes` (or --uninstall --yes)")
        if input("Write it? [y/N] ").strip().lower() not in ("y", "yes"):
            print("Not changed.")
            return
    new = dict(current)
    if after is None:
        new.pop("statusLine", None)
    else:
        new["statusLine"] = after
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".ledger-tmp")
    tmp.write_text(json.dumps(new, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    print("Written." + (" Claude Code shows it from its next status refresh." if install else ""))


@handle_errors
def statusline(
    install: Annotated[bool, Option("--install", help="Write `statusLine` (this command) into the Claude settings ($CLAUDE_CONFIG_DIR/settings.json, else ~/.claude/settings.json) after showing the change.", metavar="")] = False,
    uninstall: Annotated[bool, Option("--uninstall", help="Remove `statusLine` from the Claude settings after showing the change.", metavar="")] = False,
    yes: Annotated[bool, Option("--yes", help="With --install / --uninstall: no confirmation.", metavar="")] = False,
    home: HomeOpt = None,
    db: DbOpt = None,
) -> None:
    """One line for Claude Code's status bar: model, this session's cost and basis, today's
    cost, the active 5-hour block (cost, burn rate, time left), official limits, context.

    Reads Claude Code's status-line JSON on stdin and brings the index up to date with the
    session's transcript first. A bad stdin prints a placeholder and exits 0. See
    docs/statusline.md.
    """
    if install or uninstall:
        if install and uninstall:
            from ledger.cli.common import usage_error

            raise usage_error("--install and --uninstall cannot be used together", param_hint="--install")
        _edit(install, uninstall, yes, home, db)
        return
    try:
        raw = sys.stdin.buffer.read()
    except (OSError, ValueError):
        raw = b""
    sys.stdout.write(line(raw, home, db) + "\n")
    sys.stdout.flush()
