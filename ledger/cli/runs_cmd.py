"""`ledger runs` and `ledger show`."""

from __future__ import annotations

import sys

from typing import Annotated

from ledger.cli.common import CsvOpt, DbOpt, HomeOpt, JsonOpt, Since, Until, err, exclusive_formats, handle_errors, print_csv, print_json, print_json_stream, print_table
from ledger.cli.params import Argument, Option

# cost_usd / cost_basis: the run's cost as `ledger report run` has it (cost auto; issue 26), the
# basis beside the figure it qualifies; the command stays last (issue 12: its cell is the one cut)
RUN_COLUMNS = ("id", "started", "harness", "model", "outcome", "state", "input_tokens", "output_tokens", "cost_usd", "cost_basis",
               "evidence_gaps", "subjects",
               "ok", "error_kind", "error_detail", "skill_invoked",  # (the verdict: issue 14)
               "exit_code", "command")  # (issue 12)
_AT = {name: i for i, name in enumerate(RUN_COLUMNS)}  # a column's place in a `_row`
# an error kind the outcome already says: not repeated in the table's outcome cell
IMPLIED_KINDS = {("failed", "session-error"), ("interrupted", "cancelled"), (None, "abandoned")}


TABLE_COLUMNS = ("id", "started (UTC)", "harness", "model", "outcome", "exit", "duration", "in", "out", "cost $",
                 "gaps", "subjects", "command")
# hidden in this order on a narrow terminal, after the columns no row has a value in (every
# cell `—`: e.g. the exit code and command of imported sessions): the id (pasted into `ledger
# show`), the outcome and the cost are kept whole, the token counts are the last to go (at 40
# columns they cannot fit beside those three), the model outlasts the start time (at 80 columns
# both do not fit beside them), and no number is ever cut. The command is
# display text: it is cut (…) to the room left before it is hidden, and hidden before
# anything but the gaps and the harness.
DROP_FIRST = (10, 2, 12, 5, 11, 6, 1, 3, 7, 8)
COMMAND = 12
COMMAND_MIN = 12  # a command cut shorter than this says little: hidden instead


# the cost basis in the table after the cost, short (the reports' words: `--json` / `--csv` and `ledger show`)
BASIS_SHORT = {"reported": "rep", "estimated": "est", "mixed": "mix", "partial": "part", "unknown": "unk",
               "not_applicable": "n/a"}


def _short(row: list) -> list:
    """People read the table: a 12-character id prefix, minute-precision UTC time, and the
    liveness (running / abandoned) in place of the outcome an unsettled run does not have."""
    row = list(row)
    row[0] = row[0][:12]
    row[1] = (row[1] or "")[:16].replace("T", " ")
    kind = row[_AT["error_kind"]]
    if kind is not None and (row[4], kind) not in IMPLIED_KINDS:
        row[4] = f"{row[4] or row[5]} · {kind}"  # e.g. `completed · skill-not-invoked`
    if row[4] is None:
        row[4] = row[5]
    # money as the reports show it (exact in --json / --csv); token counts with separators
    for i in (6, 7):
        if isinstance(row[i], int):
            row[i] = f"{row[i]:,}"
    if isinstance(row[8], (int, float)):
        row[8] = f"{row[8]:,.4f}"
    known, basis = row[len(RUN_COLUMNS)], row[_AT["cost_basis"]]  # (cost_usd_known: appended by _table_row)
    if row[8] is None and known is not None:  # partly known: the known part, as the reports mark it
        row[8] = f"≥{known:,.4f}"
    if row[8] is not None and basis is not None:  # with its basis (the cost the reports use: auto)
        row[8] = f"{row[8]} {BASIS_SHORT.get(basis, basis)}"
    del row[_AT["ok"]:]  # (the verdict's columns: shown in the outcome cell)
    del row[_AT["cost_basis"]]  # (in the cost cell)
    del row[5]
    return row


def _table_row(d: dict) -> list:
    """A row of the human table: `_short(_row(d))` with the exit code and the duration after
    the outcome and the command last (the CSV keeps RUN_COLUMNS: started and ended are in
    --json)."""
    row = _short(_row(d) + [d.get("cost_usd_known")])
    row[5:5] = [d.get("exit_code"), _duration(d.get("started"), d.get("ended"))]
    row.append(d.get("command"))
    return row


def _fit(rows: list[list], width: int) -> tuple[list[str], list[list[str]]]:
    """The columns of TABLE_COLUMNS that fit `width` (hidden in DROP_FIRST order, stderr says
    which: as ledger.cli.common.print_table's drop_first) with the command cut to the room
    left; cells as printed (ledger.text.plain, `—` for unknown). Every other cell is whole."""
    from rich.cells import cell_len

    from ledger.text import plain

    cells = [[plain("—" if v is None else v) for v in r] for r in rows]
    widths = [max([cell_len(h)] + [cell_len(r[i]) for r in cells]) for i, h in enumerate(TABLE_COLUMNS)]
    keep = list(range(len(TABLE_COLUMNS)))

    def need() -> int:  # (cells, padding and dividers, with one column to spare: as _fit_columns)
        return sum(min(widths[k], COMMAND_MIN) if k == COMMAND else widths[k] for k in keep) + 3 * len(keep)

    hidden = []
    empty = [i for i in DROP_FIRST if cells and all(r[i] in ("—", "") for r in cells)]
    for i in [*empty, *DROP_FIRST]:
        if need() <= width:
            break
        if i in keep:
            keep.remove(i)
            hidden.append(TABLE_COLUMNS[i])
    if hidden:
        err(f"(narrow terminal: {', '.join(hidden)} not shown; widen it or use --json)")
    if COMMAND in keep:
        room = width - need() + min(widths[COMMAND], COMMAND_MIN)
        from ledger.tables import elide

        for r in cells:
            r[COMMAND] = elide(r[COMMAND], room)
    return [TABLE_COLUMNS[k] for k in keep], [[r[k] for k in keep] for r in cells]


def _title(n: int) -> str:
    return f"{n:,} run" + ("" if n == 1 else "s")


def run_tree(snaps: list) -> list[tuple[int, object]]:
    """(depth, run) in tree order: each run followed by its children (oldest first), a run
    whose parent is not among `snaps` at the top; the top level keeps the listing's order."""
    ids = {s.id for s in snaps}
    kids: dict[str, list] = {}
    for s in snaps:
        if s.parent_run_id in ids and s.parent_run_id != s.id:
            kids.setdefault(s.parent_run_id, []).append(s)
    for v in kids.values():
        v.sort(key=lambda s: (s.started or "", s.id))
    out: list[tuple[int, object]] = []
    seen: set[str] = set()

    def walk(s, depth: int) -> None:
        if s.id in seen:  # (a cycle in damaged records: each run once)
            return
        seen.add(s.id)
        out.append((depth, s))
        for k in kids.get(s.id, ()):
            walk(k, depth + 1)

    for s in snaps:
        if s.parent_run_id not in ids or s.parent_run_id == s.id:
            walk(s, 0)
    for s in snaps:  # runs only reachable through a cycle
        walk(s, 0)
    return out


def _nested(ordered: list[tuple[int, object]]) -> list[dict]:
    """--tree --json: the top-level runs, each with its `children` nested."""
    top: list[dict] = []
    stack: list[dict] = []
    for depth, s in ordered:
        d = {**s.to_dict(), "children": []}
        del stack[depth:]
        (stack[-1]["children"] if stack else top).append(d)
        stack.append(d)
    return top


def _home(home):
    """The home as an absolute path (the index keys homes and record paths by it)."""
    import os
    from pathlib import Path

    from ledger.home import resolve_home

    return Path(os.path.abspath(resolve_home(home)))


def _named(home):
    from ledger.home import home_named

    return home_named(home)


def _row(d: dict) -> list:
    u = d["usage"]
    return [d["id"], d["started"], d["harness"], d["model"], d["outcome"], d["state"],
            u["input_tokens"], u["output_tokens"], d.get("cost_usd"), d.get("cost_basis"), d["evidence_gaps"],
            " ".join(d["subjects"]), d.get("ok"), d.get("error_kind"), d.get("error_detail"), d.get("skill_invoked"),
            d.get("exit_code"), d.get("command")]


@handle_errors
def runs(
    home: HomeOpt = None,
    db: DbOpt = None,
    json_: JsonOpt = False,
    csv_: CsvOpt = False,
    all_: Annotated[bool, Option("--all", help="Every run (default: last 7 days, at most 50, plus unterminated runs).", metavar="")] = False,
    since: Annotated[str | None, Since] = None,
    until: Annotated[str | None, Until] = None,
    tz: Annotated[str | None, Option("--tz", metavar="ZONE", help="IANA time zone of --since/--until (default: the local zone).", show_default=False)] = None,
    limit: Annotated[int | None, Option("--limit", help="At most this many runs (default 50 without --all).", min=0, show_default=False)] = None,
    harness: Annotated[list[str] | None, Option("--harness", help="Only this harness (repeatable; `*` wildcard).", show_default=False)] = None,
    outcome: Annotated[list[str] | None, Option("--outcome", help="Only this outcome or state: completed, failed, interrupted, running, abandoned, unknown, unreadable (repeatable).", show_default=False)] = None,
    subject: Annotated[list[str] | None, Option("--subject", help="Only runs with this subject, e.g. task:LOO-1 (repeatable; `*` wildcard).", show_default=False)] = None,
    skill: Annotated[list[str] | None, Option("--skill", help="Only this skill (repeatable; `*` wildcard).", show_default=False)] = None,
    source: Annotated[list[str] | None, Option("--source", help="Only runs from this source: record (ledger run), claude-log, codex-log, gemini-log (imported sessions; repeatable).", show_default=False)] = None,
    project: Annotated[list[str] | None, Option("--project", metavar="GLOB", help="Only runs and sessions of a project matching this glob: the git top level or working directory, whole or its last part (repeatable; `ledger report project` lists them).", show_default=False)] = None,
    tree: Annotated[bool, Option("--tree", help="Each run's children (replays, runs inside the agent) under it, indented; --json: nested `children`.", metavar="")] = False,
) -> None:
    """List runs, newest first (from the index, brought up to date with the records first)."""
    exclusive_formats(json_, csv_)
    from ledger.errors import LedgerError
    from ledger.records.selection import RunFilter
    from ledger.views import indexed_selection

    from ledger.cli.common import usage_error

    start = end = None
    try:  # (the zone is read only for a range: a warm `ledger runs` loads no zone database)
        if since is not None or until is not None or tz is not None:
            from ledger.report.buckets import parse_bound, resolve_zone, utc_range

            zone, _name = resolve_zone(tz, warn=err, fixed_utc=True)
            start, end = utc_range(parse_bound(since, "--since", zone, command="runs") if since is not None else None,
                                   parse_bound(until, "--until", zone, command="runs") if until is not None else None,
                                   zone)
    except LedgerError as exc:
        raise usage_error(exc.message, hint=exc.hint) from None
    filters = RunFilter(harness=harness or (), outcome=outcome or (), subject=subject or (), skill=skill or (),
                        source=source or (), project=project or (), since=start, until=end, limit=limit,
                        ranged=since is not None or until is not None)
    sel = indexed_selection(_home(home), db, all_, err, filters=filters, named=_named(home))
    chosen = sel.runs
    if project and not chosen and not sel.in_all:
        from ledger.records.project import no_project_hint

        err(no_project_hint(project))
    if tree:
        ordered = run_tree(chosen)
        if json_:
            print_json_stream(_nested(ordered))
            return
        chosen = [s for _, s in ordered]
    if json_:
        print_json_stream(s.to_dict() for s in chosen)
    elif csv_:
        print_csv((_row(s.to_dict()) for s in chosen), RUN_COLUMNS)
    elif tree:
        title = _title(len(chosen))
        from ledger.cli.common import table_width

        rows = []
        for depth, s in ordered:
            row = _table_row(s.to_dict())
            row[0] = ("  " * (depth - 1) + "└ " if depth else "") + row[0]
            rows.append(row)
        header, rows = _fit(rows, table_width())
        print_table(rows, header, title=title, whole=_whole(header))
    else:
        title = _title(len(chosen))
        if not chosen and sel.in_all:
            from ledger.records.selection import RECENT_DAYS

            title = f"0 runs in the last {RECENT_DAYS} days ({sel.in_all:,} in all: --all)"
        if sel.hidden:
            title = f"{len(chosen):,} of {len(chosen) + sel.hidden:,} runs (--limit N or --all for more)"
        from ledger.cli.common import table_width

        header, rows = _fit([_table_row(s.to_dict()) for s in chosen], table_width())
        print_table(rows, header, title=title, whole=_whole(header))


def _whole(header: list[str]) -> list[bool]:
    """The table's columns never cut: all but harness, model, outcome, subjects and the command
    (cut with … only where the terminal is narrower than the kept columns)."""
    return [h not in ("harness", "model", "outcome", "subjects", "command") for h in header]


@handle_errors
def show(
    run: Annotated[str, Argument(help="Run id or unique prefix (with or without run_).")],
    home: HomeOpt = None,
    db: DbOpt = None,
    json_: JsonOpt = False,
    events: Annotated[bool, Option("--events", help="Also print the run's events (read from the record).", metavar="")] = False,
) -> None:
    """Show one run: its snapshot, usage streams and evidence (from the index)."""
    from ledger.views import indexed_run, snapshot_detail

    snap = indexed_run(_home(home), db, run, err, named=_named(home))
    detail = snapshot_detail(snap)
    if events:
        detail["events"] = list(_iter_events(snap.path))
    if json_:
        print_json(detail)
        return
    _print_detail(detail, events)


def _print_detail(detail: dict, events: bool) -> None:
    """The labels are ours (bold); every value is data, printed as stored (ledger.text.shown:
    no markup or emoji, control characters escaped). The final answer keeps its lines; an
    event is one JSON line."""
    from ledger.records import jsonio
    from ledger.tables import plain_stdout
    from ledger.text import plain

    # (label, text) lines; to a pipe (no styles: ledger.tables.plain_stdout) written as Rich
    # writes them there, without importing its console (issue 28); a tab (which Rich expands)
    # or a terminal goes to Rich
    lines: list[tuple[str | None, str]] = []  # (label, value); ("", a heading); (None, a line as it is)

    def field(label: str, value) -> None:
        # soft_wrap: long values are not cut into lines by Rich (a pipe gets them whole); a
        # label may carry data too (a stream id holds the model the stream named: issue 32)
        lines.append((plain(label), plain("—" if value is None or value == "" else value)))

    for key in ("id", "outcome", "exit_code", "state", "started", "ended", "harness", "model", "surface", "host", "cwd",
                "command", "path", "provider_session_id", "evidence_gaps", "api_retries"):
        field(key, detail[key])
    if detail.get("arm") is not None:  # (`ledger run --arm`)
        field("arm", detail["arm"])
    if detail.get("trials") is not None:  # (`ledger run --repeat`: a trial, or the repeat itself)
        field("trial", f"{detail['trial']} of {detail['trials']}" if detail.get("trial") is not None
              else f"repeat of {detail['trials']} trials")
    verdict = {True: "ok", False: "not ok", None: "none yet"}[detail.get("ok")]
    if detail.get("error_kind"):
        verdict += f": {detail['error_kind']} ({detail.get('error_detail') or '—'})"
    field("verdict", verdict)
    field("duration", _duration(detail.get("started"), detail.get("ended")))
    field("subjects", " ".join(detail["subjects"]))
    field("usage", ", ".join(f"{k}={v}" for k, v in detail["usage"].items() if v is not None))
    field("cost", _cost_text(detail))
    # per-model streams, attempts and tools: what --json has, in lines people read
    for st in detail.get("streams", ()):
        counters = st.get("counters") or {}
        parts = [f"{name} {counters[key]:,}" for key, name in STREAM_COUNTERS if isinstance(counters.get(key), int)]
        cost = st.get("cost_usd")
        parts.append("cost —" if cost is None else f"${cost:,.4f}")
        parts.append("final receipt" if st.get("final_receipt") else "provisional")
        field(f"stream {st.get('stream_id')}", f"{st.get('model') or '—'}: " + " · ".join(parts))
    for at in detail.get("attempts", ()):
        field(f"attempt {at.get('attempt_key')}",
              f"{at.get('provider') or '—'} {at.get('model') or '—'}, {at.get('outcome') or 'no outcome'}")
    tools = detail.get("tool_uses") or {}
    if tools:
        field("tools", ", ".join(f"{name} ×{n}" for name, n in tools.items()))
        results = detail.get("tool_results") or {}
        bad = [f"{name} {', '.join(f'{k} ×{n}' for k, n in r.items() if n and k != 'ok')}"
               for name, r in results.items() if r.get("error") or r.get("semantic-error") or r.get("unknown")]
        if bad:
            field("tool results", "; ".join(bad))
    for ch in detail.get("children", ()):
        field("child", f"{ch['id']} {ch.get('outcome') or ch.get('state')} · {ch.get('harness') or '—'}"
                       f" · {(ch.get('started') or '')[:19].replace('T', ' ')}")
    if detail["final_answer"]:
        lines.append(("", "final answer"))
        lines.append((None, plain(detail["final_answer"], multiline=True)))
    if events:
        for ev in detail["events"]:
            lines.append((None, plain(jsonio.dumps_compact(ev).decode())))
    if plain_stdout() is not None and not any("\t" in text for _, text in lines):
        sys.stdout.write("".join(text + "\n" if label is None else f"{text}:\n" if label == "" else f"{label}: {text}\n"
                                 for label, text in lines))
        sys.stdout.flush()
        return
    from rich.text import Text

    from ledger.cli.common import data_console

    c = data_console()
    for label, text in lines:
        if label == "":
            c.print(Text(text, style="bold") + ":")
        elif label is None:
            c.print(Text(text), soft_wrap=True)
        else:
            c.print(Text.assemble((label, "bold"), ": ", Text(text)), soft_wrap=True)


def _cost_text(d: dict) -> str:
    """The run's cost as the reports have it, with its basis: `$0.0123 (reported)`, `≥$0.0020
    (partial)` (the known part), `— (unknown)`."""
    basis = d.get("cost_basis")
    if basis is None:
        return "—"
    if d.get("cost_usd") is not None:
        return f"${d['cost_usd']:,.4f} ({basis})"
    if d.get("cost_usd_known") is not None:
        return f"≥${d['cost_usd_known']:,.4f} ({basis})"
    return f"— ({basis.replace('_', ' ')})"


STREAM_COUNTERS = (("input_tokens", "in"), ("output_tokens", "out"), ("cache_read_tokens", "cache read"),
                   ("cache_write_tokens", "cache write"), ("cache_write_5m_tokens", "cache write 5m"),
                   ("cache_write_1h_tokens", "cache write 1h"), ("reasoning_tokens", "reasoning"))


def _duration(started: str | None, ended: str | None) -> str | None:
    """ended - started, for people (`9.5s`, `1m 05.2s`, `66h 53m`); None when either end is unknown."""
    from datetime import datetime

    try:
        secs = (datetime.fromisoformat(ended.replace("Z", "+00:00"))
                - datetime.fromisoformat(started.replace("Z", "+00:00"))).total_seconds()
    except (AttributeError, TypeError, ValueError):
        return None
    if secs < 0:
        return None
    if secs >= 3600:  # hours and minutes, as `ledger run` says it (a session of days: `66h 53m`)
        m = int(secs // 60)
        return f"{m // 60}h {m % 60:02d}m"
    minutes, rest = divmod(secs, 60)
    return f"{int(minutes)}m {rest:04.1f}s" if minutes else f"{rest:.1f}s"


def _iter_events(path):
    import os

    from ledger.records import jsonio

    try:
        with open(os.path.join(path, "events.jsonl"), "rb") as f:
            for line in f:
                if line.endswith(b"\n") and line.strip():
                    try:
                        yield jsonio.loads(line)
                    except jsonio.JSONDecodeError:
                        yield {"malformed": line.decode("utf-8", "replace")}
    except OSError:
        return
