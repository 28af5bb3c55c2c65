"""`ledger import`: archive Claude Code transcripts, Codex rollouts and Gemini CLI chats into the home."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from ledger.cli.common import HomeOpt, JsonOpt, err, handle_errors, print_json, usage_error
from ledger.cli.params import Argument, Option
from ledger.sources.clients import IMPORTABLE

CHOICES = (*IMPORTABLE, "all")


@handle_errors
def import_(
    client: Annotated[str, Argument(help=" | ".join(CHOICES), show_default=True)] = "all",
    from_: Annotated[Path | None, Option(
        "--from", help="The client's config dir to import (e.g. a copy from another machine); "
                       "default: $CLAUDE_CONFIG_DIR else ~/.claude and ~/.config/claude; $CODEX_HOME else ~/.codex; "
                       "$GEMINI_CLI_HOME/.gemini else ~/.gemini.",
        show_default=False)] = None,
    home: HomeOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Archive the agents' own session logs into the home (sources/<client>/...).

    New complete lines of each Claude Code transcript (projects/**/*.jsonl, subagents
    included), Codex rollout (sessions/, archived_sessions/) and Gemini CLI chat
    (tmp/<project>/chats/) are copied append-only; the
    originals may then be deleted. A log that was rewritten or shrank is kept as a new
    generation and counted as an evidence gap. Nothing already imported is read again.

    The archived sessions are counted by `ledger report`, listed by `ledger runs` (source
    claude-log / codex-log / gemini-log) and in `ledger sql`; once a client was imported, every reader
    first archives what it wrote since. A summary goes to stderr (with --json, one JSON
    document to stdout).
    """
    import os
    import sys

    from ledger.home import resolve_home
    from ledger.sources import archive, logdirs

    if client not in CHOICES:
        raise usage_error(f"unknown client {client!r}", hint=f"one of: {', '.join(CHOICES)}")
    if from_ is not None and client == "all":
        raise usage_error("--from needs a client: its layout is Claude Code's, Codex's or Gemini CLI's",
                         hint="e.g. `ledger import claude --from PATH`")
    names = list(IMPORTABLE) if client == "all" else [client]
    h = Path(os.path.abspath(resolve_home(home)))
    summaries = []
    for name in names:
        c = logdirs.CLIENTS[name]
        roots = _roots(c, from_, explicit=client != "all")
        if not roots:
            looked = " and ".join(str(r) for r in logdirs.default_roots(c))
            summaries.append(_empty(c, f"no {c.label} history found (looked in {looked}); nothing to import"))
            continue
        with _progress(sys.stderr.isatty(), c.label) as progress:
            summaries.append(archive.import_client(h, c, roots, progress=progress, check=True, fold=True))
    for s in summaries:
        _print_summary(s, h)
    if any(s.roots for s in summaries):
        err("Imported sessions are counted by `ledger report` and listed by `ledger runs --source "
            "claude-log` / `codex-log` / `gemini-log`; every later command brings them up to date first.")
    if json_:
        print_json({"home": str(h), "clients": [s.to_dict() for s in summaries], "totals": _totals(summaries)})


def _roots(c: Any, from_: Path | None, explicit: bool) -> list[Path]:
    """Config dirs holding logs. An explicit --from must be one; defaults may be absent."""
    import os

    from ledger.errors import LedgerError
    from ledger.sources import logdirs

    if from_ is not None:
        if not os.path.isdir(from_):
            why = "does not exist" if not os.path.lexists(from_) else "is not a directory"
            raise LedgerError(f"--from {from_} {why}",
                              hint=f"point --from at a {c.label} config dir (it holds {' or '.join(s + '/' for s in c.subdirs)})")
        if not logdirs.has_logs_dir(c, from_):
            raise LedgerError(f"{from_} has no {' or '.join(s + '/' for s in c.subdirs)}: not a {c.label} config dir",
                              hint=f"point --from at the directory that holds {c.subdirs[0]}/")
        return [from_]
    roots = [r for r in logdirs.default_roots(c) if logdirs.has_logs_dir(c, r)]
    if not roots and explicit:
        looked = " and ".join(str(r) for r in logdirs.default_roots(c))
        raise LedgerError(f"no {c.label} history found (looked in {looked})",
                          hint=f"set ${c.env_var} or run `ledger import {c.name} --from PATH`")
    return roots


def _empty(c: Any, note: str) -> Any:
    from ledger.sources.archivesummary import ClientSummary

    s = ClientSummary(c.name)
    s.notes.append(note)
    return s


def _totals(summaries: list[Any]) -> dict[str, int]:
    keys = ("files", "unchanged", "new_files", "new_bytes", "read_bytes", "waiting", "generations")
    out = {k: sum(getattr(s, k) for s in summaries) for k in keys}
    out["gaps"] = sum(len(s.gaps) for s in summaries)
    out["skipped"] = sum(len(s.skipped) for s in summaries)
    out["repaired"] = sum(len(s.repaired) for s in summaries)
    return out


def _print_summary(s: Any, home: Path) -> None:
    from ledger.text import plain

    for note in s.notes:
        err(f"{s.client}: {plain(note)}")
    if not s.roots:
        return
    err(f"{s.client}: {s.files} files from {', '.join(plain(r) for r in s.roots)}: {s.new_files} new, "
        f"{s.new_bytes:,} new bytes archived into {plain(home / 'sources' / s.client)}, {s.unchanged} unchanged"
        + (f", {s.waiting} with a last line still being written (it waits)" if s.waiting else ""))
    for g in s.gaps:
        err(f"  evidence gap: {plain(g.path)} {plain(g.reason)}; kept as generation {g.generation} "
            f"({plain(g.archive)}), earlier generations unchanged")
    for r in s.repaired:
        err(f"  repaired {plain(r.archive)}: {plain(r.reason)}; copied again from {plain(r.log)}"
            + (f" (the damaged file is kept as {plain(r.aside)})" if r.aside else ""))
    for p in s.skipped:
        err(f"  skipped {plain(p.path)}: {plain(p.reason)}")


class _progress:
    """The import's progress line on stderr (ledger.progressline: a terminal only, long work only)."""

    def __init__(self, enabled: bool, label: str) -> None:
        self.enabled = enabled
        self.label = label

    def __enter__(self) -> Any:
        return self.update if self.enabled else None

    def update(self, done: int, total: int) -> None:
        from ledger import progressline

        progressline.show(f"archiving {self.label} logs", done, total, "files")

    def __exit__(self, *exc: Any) -> None:
        from ledger import progressline

        progressline.done()
