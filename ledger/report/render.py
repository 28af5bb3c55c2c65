"""Report output: a Rich table for people, one JSON document, or CSV. Field names are stable
(docs/report.md lists them; tests pin them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Iterator

from ledger.report.query import Report

# Every row (and the totals) has these fields, in this order. Kind-specific extras follow.
ROW_FIELDS = (
    "key", "runs", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "reasoning_tokens", "total_tokens", "unmeasured_usage_runs", "cost_usd", "cost_basis", "cost_usd_known",
    "unmeasured_cost_runs", "failed", "interrupted", "abandoned", "unverified", "evidence_gaps",
)
EVALUATION_FIELDS = ("median_cost_usd", "median_duration_ms", "judged_runs", "ok_runs", "ok_rate",
                     "skill_expected_runs", "skill_invoked_runs", "skill_invoked_rate", "tool_calls", "tool_errors",
                     "tool_error_rate")
RUN_FIELDS = ("started", "harness", "model", "outcome", "duration_ms")
SESSION_FIELDS = ("project", "last_activity")  # (ledger.report.projects.session_fields)
MODEL_FIELDS = (
    "model", "runs", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
    "reasoning_tokens", "total_tokens", "cost_usd", "cost_basis", "cost_usd_known", "unmeasured_cost_runs",
)
KEY_LABELS = {"daily": "date", "weekly": "week of", "monthly": "month", "run": "run", "session": "session",
              "model": "model", "harness": "harness", "skill": "skill", "subject": "subject", "repo": "repo",
              "host": "host", "task": "task", "home": "home"}
ALL_MODELS = "*"  # the `model` of a group's own CSV line with --breakdown


def csv_header(report: Report) -> list[str]:
    q = report.query
    fields = list(ROW_FIELDS)
    if q.breakdown:
        fields.insert(1, "model")
    if q.evaluation:
        fields += EVALUATION_FIELDS
    if q.kind == "run":
        fields += RUN_FIELDS
    if q.kind == "session":
        fields += SESSION_FIELDS
    if q.kind == "task":
        from ledger.report.tasks import TASK_FIELDS

        fields += TASK_FIELDS
    return fields


def csv_lines(report: Report) -> Iterator[list[Any]]:
    """One line per row; with --breakdown each group line (model `*`) is followed by its models."""
    header = csv_header(report)
    for row in report.rows:
        line = dict(row)
        if report.query.breakdown:
            line["model"] = ALL_MODELS
        yield [line.get(f) for f in header]
        for m in row.get("models", ()):
            sub = {f: None for f in header}
            sub.update({k: v for k, v in m.items() if k in sub})
            sub["key"] = row["key"]
            yield [sub.get(f) for f in header]


def to_csv(report: Report) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(csv_header(report))
    for line in csv_lines(report):
        w.writerow(["" if v is None else v for v in line])
    return buf.getvalue()


# --------------------------------------------------------------------------------------
# JSON

def to_json(report: Report) -> bytes:
    """The report as one JSON document and a newline, as `ledger.cli.common.print_json`
    writes it."""
    return json_document(report.to_dict())


def json_document(doc: Any) -> bytes:
    """`orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"`, made without importing orjson:
    it imports uuid and dataclasses when it loads (~12 M instructions of a warm report, ~40 M
    where nothing else loads dataclasses). Anything but JSON's own types, or a value orjson
    refuses, is left to orjson itself (tests/test_report_json.py holds the two to the same
    bytes)."""
    from json.encoder import encode_basestring  # (C: escapes exactly what orjson escapes)

    out: list[str] = []
    try:
        _json_value(doc, out, "\n", 0, encode_basestring)
        return "".join(out).encode() + b"\n"  # (a lone surrogate fails here, as in orjson)
    except (_NotPlain, UnicodeEncodeError):
        import orjson

        return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"


class _NotPlain(Exception):
    """A value orjson writes in a way of its own (or refuses): it writes the document."""


_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1  # (orjson's integers: signed and unsigned 64-bit)
_DEPTH = 254  # (orjson refuses deeper nesting)


def _json_value(v: Any, out: list[str], nl: str, depth: int, esc: Callable[[str], str]) -> None:
    """Append `v` as orjson writes it with OPT_INDENT_2 (`nl`: a newline and this level's
    indentation; `esc`: a string as a JSON string)."""
    t = type(v)
    if t is str:
        out.append(esc(v))
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif t is int:
        if not _INT_MIN <= v <= _INT_MAX:
            raise _NotPlain
        out.append(int.__repr__(v))
    elif t is float:
        out.append(_json_float(v))
    elif t is dict or t is list:
        if depth >= _DEPTH:
            raise _NotPlain
        if not v:
            out.append("{}" if t is dict else "[]")
            return
        inner = nl + "  "
        sep = "{" + inner if t is dict else "[" + inner
        if t is dict:
            for k, x in v.items():
                if type(k) is not str:
                    raise _NotPlain
                out.append(sep)
                out.append(esc(k))
                out.append(": ")
                _json_value(x, out, inner, depth + 1, esc)
                sep = "," + inner
        else:
            for x in v:
                out.append(sep)
                _json_value(x, out, inner, depth + 1, esc)
                sep = "," + inner
        out.append(nl + ("}" if t is dict else "]"))
    else:
        raise _NotPlain


def _json_float(x: float) -> str:
    """orjson's text of a finite float: Python's shortest repr, but 1e-5 <= |x| < 1e-4 written
    out (0.0000123) and exponents without leading zeros (1e-7, 1e+16)."""
    if x != x or x in (float("inf"), float("-inf")):
        raise _NotPlain  # (orjson writes null)
    r = float.__repr__(x)
    if "e" not in r:
        return r
    mant, _, exp = r.partition("e")
    e = int(exp)
    if e == -5:
        sign = "-" if mant[0] == "-" else ""
        return f"{sign}0.0000{mant.lstrip('-').replace('.', '')}"
    return f"{mant}e{'+' if e > 0 else '-'}{-e if e < 0 else e}"


# --------------------------------------------------------------------------------------
# table


def fmt_int(v: Any) -> str:
    return "—" if v is None else f"{v:,}"


def fmt_cost(d: dict[str, Any]) -> str:
    if d.get("cost_usd") is not None:
        return f"{d['cost_usd']:,.4f}"
    if d.get("cost_usd_known") is not None:
        return f"≥{d['cost_usd_known']:,.4f}"  # partial: a lower bound
    return "—"


def fmt_rate(rate: Any) -> str:
    """A rate as a whole percentage; — when there was nothing to rate."""
    return "—" if rate is None else f"{rate * 100:.0f}%"


def fmt_duration(ms: Any) -> str:
    if ms is None:
        return "—"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def fmt_tokens(d: dict[str, Any], name: str) -> str:
    """A token sum; `+` marks a lower bound (some runs in the row reported no usage)."""
    v = d.get(name)
    if v is None:
        return "—"
    return f"{v:,}" + ("+" if d.get("unmeasured_usage_runs") else "")


def fmt_short(v: Any) -> str:
    """A token count in at most 6 cells for the compact time table: `987`, `12.3k`, `4.5M`,
    `1.2B` (rounded to one decimal; exact in --json / --csv)."""
    if v is None:
        return "—"
    if -1000 < v < 1000:
        return str(v)
    for unit, div in (("k", 10**3), ("M", 10**6), ("B", 10**9)):
        x = round(v / div, 1)
        if -1000 < x < 1000:
            return f"{x:.1f}{unit}"
    return f"{v / 10**12:,.1f}T"


def fmt_short_tokens(d: dict[str, Any], name: str) -> str:
    """fmt_tokens, abbreviated (fmt_short); `+` marks a lower bound as there."""
    v = d.get(name)
    if v is None:
        return "—"
    return fmt_short(v) + ("+" if d.get("unmeasured_usage_runs") else "")


SESSION_PREFIX = 8  # a session id's cells in a narrow table (its first group: whole in --json / --csv)
PROJECT_CELLS = 20  # a project's cells at most in the session table (its directory's name, cut …)


def _key_text(report: Report, key: Any, width: int = 200) -> str:
    if key is None:
        return "(none)"
    if report.query.kind == "run":
        return str(key)[:16]
    if report.query.kind == "session" and width < 120:  # (room for its project and last activity)
        return str(key)[:SESSION_PREFIX]
    return str(key)


def _project_text(d: dict[str, Any]) -> str:
    """A session row's project in the table: its directory's name (the path: --json / --csv)."""
    project = d["project"]
    if project is None:
        return "—"
    from ledger.records.project import last_component
    from ledger.tables import elide

    return elide(last_component(project), PROJECT_CELLS)


def _local_minute(stamp: str | None, zone: Any) -> str:
    """An RFC 3339 UTC time as `YYYY-MM-DD HH:MM` in the report's zone."""
    if not stamp:
        return "—"
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(zone).strftime("%Y-%m-%d %H:%M")


def table_columns(report: Report, width: int) -> list[tuple[str, Any]]:
    """(header, cell function) pairs: every column when the terminal is wide, fewer when not."""
    q = report.query
    compact = width < 120
    cols: list[tuple[str, Any]] = [(KEY_LABELS[q.kind], None), ("runs", lambda d: fmt_int(d["runs"]))]
    if q.kind == "run":
        cols += [("started", lambda d: (d.get("started") or "")[:16].replace("T", " ")),
                 ("model", lambda d: d.get("model") or "—")]
    if q.kind == "session":  # (issue 29: which project, and when last active; whole in --json)
        cols += [("project", lambda d: _project_text(d) if "project" in d else ""),
                 ("last active", lambda d: _local_minute(d["last_activity"], q.zone) if "last_activity" in d else "")]
    if compact and q.is_time:  # (issue 29: the split at 80 columns, as ccusage's daily table)
        cols += [("input", lambda d: fmt_short_tokens(d, "input_tokens")),
                 ("output", lambda d: fmt_short_tokens(d, "output_tokens")),
                 ("cache rd", lambda d: fmt_short_tokens(d, "cache_read_tokens")),
                 ("cache wr", lambda d: fmt_short_tokens(d, "cache_write_tokens"))]  # (short: the basis fits too)
    elif compact:
        cols += [("tokens", lambda d: fmt_tokens(d, "total_tokens"))]
    else:
        cols += [("input", lambda d: fmt_tokens(d, "input_tokens")),
                 ("output", lambda d: fmt_tokens(d, "output_tokens")),
                 ("cache read", lambda d: fmt_tokens(d, "cache_read_tokens")),
                 ("cache write", lambda d: fmt_tokens(d, "cache_write_tokens")),
                 ("total tokens", lambda d: fmt_tokens(d, "total_tokens"))]
    cols += [("cost $", fmt_cost), ("basis", lambda d: d.get("cost_basis") or "")]
    if q.evaluation:
        cols += [("median $", lambda d: "—" if d.get("median_cost_usd") is None else f"{d['median_cost_usd']:,.4f}"),
                 ("median time", lambda d: fmt_duration(d.get("median_duration_ms"))),
                 ("ok", lambda d: fmt_rate(d.get("ok_rate"))), ("invoked", lambda d: fmt_rate(d.get("skill_invoked_rate"))),
                 ("tool err", lambda d: fmt_rate(d.get("tool_error_rate")))]
    if compact:
        cols += [("failed", lambda d: _count(d, "failed"))]
    else:
        cols += [("failed", lambda d: _count(d, "failed")), ("intr.", lambda d: _count(d, "interrupted")),
                 ("aband.", lambda d: _count(d, "abandoned"))]
    if q.evaluation or not compact:
        cols += [("unverified", lambda d: _count(d, "unverified"))]
    if q.kind == "task":  # the task verdict (ledger.records.verdict.combine_task)
        cols += [("verdict", lambda d: {True: "ok", False: d.get("error_kind") or "not ok"}.get(d.get("ok"), "—")),
                 ("tool err", lambda d: f"{d.get('tool_errors', 0)}/{d.get('tool_calls', 0)}")]
    return cols


# cells a per-model row leaves empty (they describe the group)
GROUP_ONLY = ("failed", "intr.", "aband.", "unverified", "median $", "median time", "started", "model", "ok",
              "invoked", "tool err", "verdict", "project", "last active")
# hidden in this order while the table is wider than the terminal: the group key, the run
# count, the tokens and the cost stay whole (a cut number reads as another number)
DROP_ORDER = ("tool err", "invoked", "unverified", "aband.", "intr.", "median time", "failed", "started", "model", "median $", "basis",
              "project", "last active", "cache write", "cache wr", "cache read", "cache rd")


def _fit(cols: list[tuple[str, Any]], body: list[tuple[list[str], Any]], width: int) -> list[int]:
    """The columns to show: all that fit, hiding DROP_ORDER first; the key column folds last."""
    from rich.cells import cell_len

    from ledger.text import plain

    widths = [max([len(name)] + [cell_len(plain(cells[i])) for cells, _ in body]) for i, (name, _) in enumerate(cols)]
    keep = list(range(len(cols)))
    for drop in DROP_ORDER:
        if sum(widths[k] for k in keep) + 3 * len(keep) <= width:
            break
        keep = [k for k in keep if k == 0 or cols[k][0] != drop]  # (the key stays: `report model`'s is "model")
    return keep


def _count(d: dict[str, Any], name: str) -> str:
    v = d.get(name)
    return "" if v is None else str(v)


def print_table(report: Report, console: Any = None) -> None:
    """Group labels and model names are data (a subject, a host, a model an agent named):
    every cell is printed as stored (ledger.text.shown: no markup or emoji, control
    characters escaped). To a pipe or a file (no styles: ledger.tables.plain_stdout) a table
    that fits is written without importing Rich's console; else Rich prints it."""
    from ledger.tables import layout, plain_stdout
    from ledger.text import plain, shown

    width = plain_stdout() if console is None else None
    if width is None:
        from rich.console import Console

        console = console or Console(emoji=False, highlight=False)
        width = console.width
    q = report.query
    cols = table_columns(report, width)
    title = f"ledger report {q.kind} · {q.zone_name}"
    if q.since or q.until:
        from ledger.report.buckets import bound_text

        title += f" · {bound_text(q.since) if q.since else '…'} to {bound_text(q.until) if q.until else '…'}"
    title += f" · cost {q.cost}"
    body: list[tuple[list[str], str | None]] = []
    for row in report.rows:
        body.append(([_key_text(report, row["key"], width)] + [fn(row) for _, fn in cols[1:]], None))
        for m in row.get("models", ()):
            body.append(([f"  └ {m['model'] or '(unknown model)'}"] + [
                fn(m) if name not in GROUP_ONLY else "" for name, fn in cols[1:]], "dim"))
    body.append((["Total"] + [fn(report.totals) for _, fn in cols[1:]], "bold"))
    keep = _fit(cols, body, width)
    justify = ["left" if i == 0 or cols[i][0] in ("basis", "started", "model", "project", "last active") else "right"
               for i in keep]
    headers = [cols[i][0] for i in keep]
    rows = [([plain(cells[i]) for i in keep], style, style == "bold") for cells, style in body]
    if console is None:
        import sys

        from rich.cells import cell_len

        pieces = layout(width, headers, justify, rows)
        head = plain(title)
        if pieces is not None and cell_len(head) <= width:  # (what Rich writes without styles)
            sys.stdout.write(head + "\n" + "".join(p for p, _ in pieces) + "\n")
            sys.stdout.flush()
            return
        from rich.console import Console

        console = Console(emoji=False, highlight=False)
    console.print(shown(title, style="bold"), overflow="fold")
    # a table that fits is written as Rich would draw it, without measuring every cell (issue 10)
    from ledger.tables import draw

    if draw(console, headers, justify, rows):
        return
    from rich import box
    from rich.table import Table

    table = Table(pad_edge=False, box=box.SIMPLE_HEAD)
    for i, how in zip(keep, justify):
        table.add_column(cols[i][0], justify=how, overflow="fold", no_wrap=i != 0)
    for cells, style in body:
        if style == "bold":
            table.add_section()
        table.add_row(*[shown(cells[i]) for i in keep], style=style)
    console.print(table)


def notes(report: Report) -> list[str]:
    """What a person must know to read the numbers (printed on stderr under the table)."""
    out = []
    t = report.totals
    if t.get("cost_basis") == "partial":
        out.append(f"note: the cost of {t['unmeasured_cost_runs']} of {t['runs']} runs is unknown; "
                   "'≥' marks a sum of the known part (basis 'partial').")
    if report.query.kind == "model":
        held = sum(r["runs"] for r in report.rows)
        if held > t["runs"]:
            out.append(f"note: a run is in the row of each model that served it: these rows hold {held:,} runs "
                       f"of {t['runs']:,}.")
    if t.get("unmeasured_usage_runs"):
        n = t["unmeasured_usage_runs"]
        out.append(f"note: {_runs(n)} reported no token usage; '+' marks token sums that leave "
                   f"{'it' if n == 1 else 'them'} out.")
    if report.unreadable:
        n = len(report.unreadable)
        out.append(f"note: {n:,} unreadable record{'' if n == 1 else 's'} (damaged, or a symlink) "
                   f"{'is' if n == 1 else 'are'} not counted in these figures; `ledger verify` lists "
                   f"{'it' if n == 1 else 'them'}.")
    return out


def warnings(report: Report) -> list[str]:
    """One warning per reason a cost is unknown, naming the model."""
    out = []
    for u in report.pricing.get("unpriced", ()):
        runs = _runs(u["runs"])
        what = f"model {u['model']!r}" if u.get("model") else "runs without a model"
        if u.get("reason") == "no usage reported":
            out.append(f"warning: cost unknown for {runs}: no usage reported")
        else:
            out.append(f"warning: cost unknown for {runs} of {what}: {u['reason']}")
    return out


def _runs(n: int) -> str:
    return f"{n:,} run" + ("" if n == 1 else "s")
