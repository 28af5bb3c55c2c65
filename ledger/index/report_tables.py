"""The report's own tables, declared with the rest of the schema (the index owns every table
and every migration; the report owns the logic that fills them, ledger.report.sync) (migrations `0002_report`, `0003_partial_costs`): per-run, per-model facts with cached
cost estimates, and two rollups of them.

All of it is derived data (like the whole index): rebuilt from `runs`, `usage_streams` and
`subjects` plus the pinned price table, never from anything else (ledger.report.sync).

- `report_facts`, one row per (run, usage-stream model); a run without usage has one row
  with model_key ''. It is **the estimate cache**: pricing a stream with genai-prices costs
  ~0.1-0.3 ms, so each row keeps its estimate with the `usage_fingerprint` of the streams it
  priced and is re-priced only when they change (or when the price data version, kept in
  `report_state`, changes). It is also the table reports aggregate when no rollup fits:
  narrow, clustered (on SQLite) by the 15-minute UTC slot of the run's start, with every
  group-by and filter column on the row (no join with the wide, text-keyed `runs` table,
  which costs more than a second per million rows on SQLite).
  Run-level columns (outcome counts, gaps, duration, run costs, the first subject) are set
  on the run's *first* row (`first` = 1, the smallest model_key) and are 0/NULL on the
  others, so sums over rows count each run once; token and per-model cost columns are per
  row and add up to the run's totals.
- `report_slots` (per slot and model) and `report_days` (per UTC day, harness, run model,
  model and outcome): the same measures summed, recomputed for every slot / day a sync
  touches; the time and model/harness reports read them (docs/report.md, "How it works").
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Double, Index, Integer, LargeBinary, SmallInteger, Text

from ledger.index.tabledefs import Mapped, mapped_column

from ledger.index.metadata import Base
from ledger.sqlviews import REPORT_VIEWS  # noqa: F401 - re-exported

# the measures, kinds and codes: plain constants shared with the driver-level code
from ledger.index.reportshape import (  # noqa: F401 - re-exported
    CELL_KINDS, CHANGE_TRIGGERS, ESTIMATED, GROUP_KINDS, GROUP_VALUES, GROUP_VERDICTS, MIXED, MODEL_MEASURES,
    REPORT_TABLES, REPORTED, RUN_MEASURES, SLOT_SECONDS,
)


class ReportFact(Base):
    __tablename__ = "report_facts"

    slot: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # floor(created epoch / 900)
    home_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    model_key: Mapped[str] = mapped_column(Text, primary_key=True)  # model, or '' when unknown/no usage
    created_s: Mapped[int] = mapped_column(BigInteger)  # floor(created epoch)
    first: Mapped[int] = mapped_column(SmallInteger)
    # what the row was derived from (the run row's identity in time) and the usage it priced
    indexed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    settled: Mapped[int] = mapped_column(SmallInteger)
    state: Mapped[str] = mapped_column(Text)
    usage_fingerprint: Mapped[int] = mapped_column(BigInteger)
    # group-by / filter dimensions (same on every row of a run, except model)
    harness: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text, server_default="record")  # migration 0005: runs.source
    # migration 0005: 1 on the first row of each slot of a run. A run record is one piece (its
    # first row); an imported session is one piece per slot it spent in, each carrying the
    # run-level costs of that slot, so a day is charged what a session spent that day.
    piece: Mapped[int] = mapped_column(SmallInteger, server_default="0")
    run_model: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    models: Mapped[str] = mapped_column(Text)  # "|m1|m2|": every model of the run, for --model
    skill: Mapped[str | None] = mapped_column(Text)
    repo: Mapped[str | None] = mapped_column(Text)
    host: Mapped[str | None] = mapped_column(Text)
    session: Mapped[str | None] = mapped_column(Text)
    subject: Mapped[str | None] = mapped_column(Text)  # the first subject; more in `subjects` (index)
    subjects_n: Mapped[int] = mapped_column(SmallInteger)
    outcome: Mapped[str] = mapped_column(Text)  # completed|failed|interrupted|abandoned|running|unknown
    # run-level facts, on the first row only (0 / NULL elsewhere)
    failed: Mapped[int] = mapped_column(SmallInteger)
    interrupted: Mapped[int] = mapped_column(SmallInteger)
    abandoned: Mapped[int] = mapped_column(SmallInteger)
    unverified: Mapped[int] = mapped_column(SmallInteger)  # evidence_gaps > 0
    evidence_gaps: Mapped[int] = mapped_column(Integer)
    no_usage: Mapped[int] = mapped_column(SmallInteger)  # the run reported no usage at all
    duration_ms: Mapped[int | None] = mapped_column(BigInteger)
    run_cost_reported: Mapped[float | None] = mapped_column(Double)
    run_cost_estimated: Mapped[float | None] = mapped_column(Double)
    run_cost_auto: Mapped[float | None] = mapped_column(Double)
    run_basis_auto: Mapped[int | None] = mapped_column(SmallInteger)
    run_total_tokens: Mapped[int | None] = mapped_column(BigInteger)  # orders `report run`
    # per (run, model) usage and cost
    input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_tokens: Mapped[int | None] = mapped_column(BigInteger)
    reasoning_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cost_reported: Mapped[float | None] = mapped_column(Double)
    cost_estimated: Mapped[float | None] = mapped_column(Double)
    cost_auto: Mapped[float | None] = mapped_column(Double)
    basis_auto: Mapped[int | None] = mapped_column(SmallInteger)
    unpriced: Mapped[str | None] = mapped_column(Text)  # why the estimate of this model is unknown
    # migration 0003: the known part of a cost that is not fully known (NULL when the cost
    # is known, or nothing of it is), per mode; run-level on the first row only
    run_cost_reported_partial: Mapped[float | None] = mapped_column(Double)
    run_cost_estimated_partial: Mapped[float | None] = mapped_column(Double)
    run_cost_auto_partial: Mapped[float | None] = mapped_column(Double)
    cost_reported_partial: Mapped[float | None] = mapped_column(Double)
    cost_estimated_partial: Mapped[float | None] = mapped_column(Double)
    cost_auto_partial: Mapped[float | None] = mapped_column(Double)
    # migration 0004: the verdict counts of the evaluation view, run-level (first row only):
    # judged (a verdict exists), ok, skill_expected (skill_invoked known), skill_invoked,
    # tool_calls and tool_errors (error + semantic-error results)
    judged: Mapped[int] = mapped_column(SmallInteger, server_default="0")
    ok: Mapped[int] = mapped_column(SmallInteger, server_default="0")
    skill_expected: Mapped[int] = mapped_column(SmallInteger, server_default="0")
    skill_invoked: Mapped[int] = mapped_column(SmallInteger, server_default="0")
    tool_calls: Mapped[int] = mapped_column(Integer, server_default="0")
    tool_errors: Mapped[int] = mapped_column(Integer, server_default="0")

    __table_args__ = (
        # by run (sync, joins). Not including `first`: SQLite would then scan this index
        # (and look every row up) for `WHERE first = 1` instead of scanning the table
        Index("ix_report_facts_home_id_run_id", "home_id", "run_id"),
        Index("ix_report_facts_settled_state", "settled", "state"),  # the sync's running runs
        Index("ix_report_facts_unpriced", "unpriced"),
        # migration 0009: the sync recomputes a changed group of report_groups from its rows
        Index("ix_report_facts_session", "session"),
        # migration 0009: `report run --limit N` (cost auto) walks the most expensive runs in
        # order: the fully known costs, and the known parts of the others
        Index("ix_report_facts_run_cost_auto", "run_cost_auto"),
        Index("ix_report_facts_run_cost_auto_partial", "run_cost_auto_partial"),
        {"sqlite_with_rowid": False},
    )




def _measure_type(name: str, func: str) -> type:
    if func in ("min", "max"):
        return SmallInteger
    if func == "sum" and "cost" in name:
        return Double
    return BigInteger


def _measures(cls: type, measures: tuple) -> None:
    for name, func, _ in measures:
        setattr(cls, name, mapped_column(_measure_type(name, func), nullable=True))


class ReportSlot(Base):
    """Every measure per 15-minute UTC slot and model: `daily` / `weekly` / `monthly` (with
    or without --breakdown) in any zone."""

    __tablename__ = "report_slots"

    slot: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    model_key: Mapped[str] = mapped_column(Text, primary_key=True)


class ReportDay(Base):
    """Every measure per UTC day x harness x run model x model x outcome: the `model` and
    `harness` reports (the partial days at the ends of a --since/--until range in another
    zone come from report_facts)."""

    __tablename__ = "report_days"

    day: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # floor(created epoch / 86400)
    harness: Mapped[str] = mapped_column(Text, primary_key=True)
    run_model_key: Mapped[str] = mapped_column(Text, primary_key=True)  # run_model, '' when unknown
    model_key: Mapped[str] = mapped_column(Text, primary_key=True)
    outcome: Mapped[str] = mapped_column(Text, primary_key=True)


_measures(ReportSlot, RUN_MEASURES + MODEL_MEASURES)
_measures(ReportDay, RUN_MEASURES + MODEL_MEASURES)


# Group-by reports kept whole (migration 0009): every measure of RUN_MEASURES, the verdict
# sums and (evaluation kinds) each group's runs' figures sorted, for the medians


class ReportGroup(Base):
    """Every run-level measure per session and per skill (`report session|skill` without
    filters, the HTML page's top sessions and evaluation view), recomputed by the sync for
    every group a changed run left or joined. A run without a session / skill is in the
    group with `gnull` = 1 (gkey ''): a key column of a primary key cannot be NULL."""

    __tablename__ = "report_groups"

    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    gnull: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    gkey: Mapped[str] = mapped_column(Text, primary_key=True)

    __table_args__ = ({"sqlite_with_rowid": False},)  # (a kind's groups are read in key order)


_measures(ReportGroup, RUN_MEASURES)
# the known cost of the `auto` mode (fully known runs' costs plus the others' known parts; NULL
# when nothing is known), what `--limit` ranks by: indexed per kind
ReportGroup.rank_auto = mapped_column(Double, nullable=True)
ReportGroup.__table__.append_constraint(Index("ix_report_groups_kind_rank_auto", "kind", "rank_auto"))
for _name in GROUP_VERDICTS:
    setattr(ReportGroup, _name, mapped_column(BigInteger, nullable=True))
for _name, _ in GROUP_VALUES:
    setattr(ReportGroup, _name, mapped_column(LargeBinary, nullable=True))


class ReportGroupDay(Base):
    """The measures of report_groups per UTC day, for the kinds with few big groups (skill,
    CELL_KINDS): a change recomputes its group's day from that day's facts (a range of the
    facts' key), and the group from its days; its sorted figures are updated by the runs'
    old and new values. (A group of a million runs is never read whole to apply a change.)"""

    __tablename__ = "report_group_days"

    kind: Mapped[str] = mapped_column(Text, primary_key=True)
    gnull: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    gkey: Mapped[str] = mapped_column(Text, primary_key=True)
    day: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # floor(created epoch / 86400), as report_days

    __table_args__ = ({"sqlite_with_rowid": False},)


_measures(ReportGroupDay, RUN_MEASURES)
for _name in GROUP_VERDICTS:
    setattr(ReportGroupDay, _name, mapped_column(BigInteger, nullable=True))


class ReportState(Base):
    """Key/value bookkeeping of the facts sync (`price_version`, `fact_runs`, `fact_rules`)."""

    __tablename__ = "report_state"

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str | None] = mapped_column(Text)


class ReportChange(Base):
    """The change log of `runs` (migration `0007_report_changes`): one row per run inserted,
    updated or deleted, written by triggers on `runs` in the writer's own transaction, and
    consumed (deleted) by the sync, which rebuilds the facts of exactly those runs.

    Why not a timestamp: `runs.indexed_at` comes from each indexing machine's clock, so a
    machine whose clock is behind (or an index pass that commits after a later one) wrote
    rows older than what the sync had already seen, and they were never reported (issue
    11). A row here is visible to the sync exactly when the run's new row is (same
    transaction), whatever any clock says, and whatever code wrote `runs` (the indexer's
    batches, COPY, the imported sessions, a hand-written UPDATE). `seq` only orders the log."""

    __tablename__ = "report_changes"

    seq: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True,
                                     autoincrement=True)
    home_id: Mapped[int] = mapped_column(Integer)
    run_id: Mapped[str] = mapped_column(Text)


