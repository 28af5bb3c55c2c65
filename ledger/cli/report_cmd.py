"""`ledger report`: tokens, cost and outcomes per day / week / month / run / model / ...

Thin layer: parses options, calls ledger.report.service.build_report, prints.

The annotations are evaluated when the function is defined (no `from __future__ import
annotations`): ledger.cli.fastpath reads them with typing.get_type_hints, which compiles every
annotation written as a string (~4 M instructions of a warm report for this signature).
"""

import sys
from pathlib import Path
from typing import Annotated

from ledger.cli.common import (
    CsvOpt, DbOpt, HomeOpt, JsonOpt, Since, Until, err, exclusive_formats, handle_errors, usage_error,
)
from ledger.cli.params import Argument, Option
from ledger.report.kinds import (
    COST_MODES, EVALUATION_KINDS, EXTRA_KINDS, FILTER_LABELS, KINDS, ORDERS, OUTCOMES, WEEK_STARTS, known_outcome,
)

ListOpt = list[str] | None


def _filter(name: str) -> object:
    def text() -> str:
        label = FILTER_LABELS[name]
        if name == "harness":  # (the registered harnesses: imported for --help only, not on every report)
            from ledger.launch.adapters import HARNESSES

            label = f"{label} ({', '.join(HARNESSES)})"
        return f"Only runs with this {label} (repeat for several; `*` is a wildcard)."

    return Option(f"--{name.replace('_', '-')}", help=text, show_default=False)


@handle_errors
def report(
    kind: Annotated[str, Argument(help=" | ".join(KINDS + EXTRA_KINDS),
                                        show_default=True)] = "daily",
    since: Annotated[str | None, Since] = None,
    until: Annotated[str | None, Until] = None,
    tz: Annotated[str | None, Option("--tz", metavar="ZONE", help="IANA time zone of the buckets and of --since/--until (default: the local zone).", show_default=False)] = None,
    week_start: Annotated[str, Option("--week-start", help=f"{' | '.join(WEEK_STARTS)} (weekly reports).")] = "monday",
    harness: Annotated[ListOpt, _filter("harness")] = None,
    model: Annotated[ListOpt, _filter("model")] = None,
    skill: Annotated[ListOpt, _filter("skill")] = None,
    subject: Annotated[ListOpt, _filter("subject")] = None,
    repo: Annotated[ListOpt, _filter("repo")] = None,
    host: Annotated[ListOpt, _filter("host")] = None,
    source: Annotated[ListOpt, _filter("source")] = None,
    home_id: Annotated[ListOpt, _filter("home_id")] = None,
    project: Annotated[ListOpt, Option("--project", metavar="GLOB", help="Only runs and sessions of a project matching this glob: the git top level or working directory, whole or its last part (`--project myrepo`; repeat for several; `ledger report project` lists them).", show_default=False)] = None,
    outcome: Annotated[ListOpt, Option("--outcome", help=f"{' | '.join(OUTCOMES)} (repeatable).", show_default=False)] = None,
    by: Annotated[str | None, Option("--by", help=f"{' | '.join(EVALUATION_KINDS)}: the evaluation view (same as the {' / '.join(EVALUATION_KINDS)} reports).", show_default=False)] = None,
    breakdown: Annotated[bool, Option("--breakdown", help="Per-model rows under each group.", metavar="")] = False,
    order: Annotated[str | None, Option("--order", help=f"{' | '.join(ORDERS)} (default: time reports oldest first, others most expensive first).", show_default=False)] = None,
    limit: Annotated[int | None, Option("--limit", help="At most this many rows (totals still cover every matching run).", show_default=False, min=0)] = None,
    cost: Annotated[str, Option("--cost", help="auto (provider's receipt, else estimate) | reported | estimated.")] = "auto",
    home: HomeOpt = None,
    db: DbOpt = None,
    json_: JsonOpt = False,
    csv_: CsvOpt = False,
    html: Annotated[Path | None, Option("--html", help="Write one self-contained HTML page with charts (needs the html extra: pip install 'ledger\\[html]').", show_default=False, metavar="PATH")] = None,
    open_: Annotated[bool, Option("--open", help="Open the --html page in the browser.", metavar="")] = False,
    resync: Annotated[bool, Option("--resync", help="Rebuild the report's tables from the index first (every run re-read and re-priced; see docs/report.md).", metavar="")] = False,
    active: Annotated[bool, Option("--active", help="blocks: only the active block.", metavar="")] = False,
    recent: Annotated[bool, Option("--recent", help="blocks: only the last 3 days' blocks and the active one.", metavar="")] = False,
    token_limit: Annotated[str | None, Option("--token-limit", help="blocks: tokens per block, or `max` (the largest completed block), to show use against.", show_default=False, metavar="N|max")] = None,
    session_length: Annotated[float, Option("--session-length", help="blocks: hours per block (a multiple of 0.25).")] = 5.0,
) -> None:
    """Tokens, cost and outcomes of runs, grouped by day, week, month, run, model, skill, subject...

    Read from the index (brought up to date with the records first). A run belongs to the
    bucket of its start time in --tz. Unknown costs are never counted as $0: a group with
    some is `partial`, and a warning on stderr names the unpriced model. See docs/report.md.
    `ledger report compare [A B]` compares arms (see its --help and docs/evaluation.md).
    """
    exclusive_formats(json_, csv_)
    if kind == "blocks":
        from ledger.cli.blocks_cmd import blocks

        return blocks(home=home, db=db, json_=json_, csv_=csv_, active=active, recent=recent,
                      token_limit=token_limit, session_length=session_length, resync=resync, project=project)
    if kind == "project":
        from ledger.cli.projects_cmd import projects

        return projects(home=home, db=db, json_=json_, csv_=csv_, tz=tz, resync=resync, project=project)
    if active or recent or token_limit is not None or session_length != 5.0:
        raise usage_error("--active, --recent, --token-limit and --session-length are options of `report blocks`",
                          param_hint="KIND")
    if html is not None and (json_ or csv_):
        raise usage_error("--html cannot be used with --json or --csv", param_hint="--html")
    if open_ and html is None:
        raise usage_error("--open opens the page --html writes", param_hint="--open")
    if kind == "compare":  # (`ledger report compare` is its own command: ledger.cli.compare_cmd)
        raise usage_error("put compare right after report: `ledger report compare [A B] [OPTIONS]`",
                          param_hint="KIND")
    if kind not in KINDS:
        raise usage_error(f"expected one of {', '.join(KINDS)}", param_hint="KIND")
    if by is not None:
        if by not in EVALUATION_KINDS:
            raise usage_error(f"expected {' or '.join(EVALUATION_KINDS)}", param_hint="--by")
        if kind not in ("daily", by):
            raise usage_error(f"--by {by} is the `{by}` report; it cannot be combined with `{kind}`",
                                     param_hint="--by")
        kind = by
    for name, value, choices in (("--week-start", week_start, WEEK_STARTS), ("--order", order, ORDERS),
                                 ("--cost", cost, COST_MODES)):
        if value is not None and value not in choices:
            raise usage_error(f"expected one of {', '.join(choices)}", param_hint=name)

    from ledger.home import home_named, resolve_home
    from ledger.report.query import ReportQuery
    from ledger.report.buckets import ReportError, parse_bound, resolve_zone, utc_range
    from ledger.report.service import build_report

    if limit is not None:
        limit = min(limit, 2**63 - 1)  # more rows than SQL (and JSON) integers count is all of them
    for value in outcome or ():
        if not known_outcome(value):
            raise usage_error(f"{value!r} is not one of {', '.join(OUTCOMES)}", param_hint="--outcome")
    try:  # a date or zone the report cannot use is a usage mistake, found before any work
        zone, zone_name = resolve_zone(tz, warn=err, fixed_utc=True)
        since_day = parse_bound(since, "--since", zone) if since is not None else None
        until_day = parse_bound(until, "--until", zone) if until is not None else None
        utc_range(since_day, until_day, zone)  # --until before --since
    except ReportError as exc:
        raise usage_error(exc.message, hint=exc.hint) from None
    q = ReportQuery(
        kind=kind, zone=zone, zone_name=zone_name, since=since_day, until=until_day,
        week_start=week_start,
        filters={k: v for k, v in (("harness", harness), ("model", model), ("skill", skill), ("subject", subject),
                                   ("repo", repo), ("host", host), ("outcome", outcome), ("source", source),
                                   ("home_id", home_id), ("project", project)) if v},
        breakdown=breakdown, order=order, limit=limit, cost=cost,
    )
    if html is not None:
        from ledger.report.html import write_report

        rep, page = write_report(resolve_home(home), db, q, html, notify=err, resync=resync,
                                 named=home_named(home))
    else:
        rep = build_report(resolve_home(home), db, q, notify=err, resync=resync, named=home_named(home))
    from ledger.report import render

    for line in render.warnings(rep):
        err(line)
    if html is not None:
        print(page)
        if open_:
            import webbrowser

            webbrowser.open(page.resolve().as_uri())
    elif json_:
        sys.stdout.buffer.write(render.to_json(rep))  # (print_json's bytes, without orjson)
        sys.stdout.flush()
    elif csv_:
        sys.stdout.write(render.to_csv(rep))
        sys.stdout.flush()
    else:
        render.print_table(rep)
        for line in render.notes(rep):
            err(line)
    if project and not rep.rows:
        from ledger.records.project import no_project_hint

        err(no_project_hint(project))
