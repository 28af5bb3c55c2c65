"""The index schema as table classes (the projection of run records): SQLAlchemy Core tables
built from declarative-looking classes without the ORM (ledger.index.tabledefs).

The migrations in `ledger/index/migrations/versions/` create exactly this schema;
`tests/test_migrations.py` proves the two agree (no autogenerate diff on SQLite and
PostgreSQL). Change a model only together with a new migration.

Conventions: timestamps are UTC (`created_at`, `ended_at`); token counters are BIGINT and
NULL when nobody reported them (unknown is not zero); a run is identified by
(`home_id`, `run_id`) so several homes can share one database.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger, Boolean, DateTime, Double, ForeignKey, ForeignKeyConstraint, Index, Integer,
    Text, UniqueConstraint,
)

from ledger.index.metadata import NAMING, Base  # noqa: F401 - (NAMING re-exported)
from ledger.index.tabledefs import Mapped, mapped_column

from ledger.records.model import ALL_INT_COUNTERS

# The reduced per-run / per-stream counters, in the order the views list them: the record
# format's list (ledger.records.model), so a new counter is declared once.
COUNTER_COLUMNS = ALL_INT_COUNTERS


class Meta(Base):
    """Key/value facts about this index. `application` = `ledger-index` marks the file as ours."""

    __tablename__ = "ledger_meta"

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    value: Mapped[str | None] = mapped_column(Text)


class Home(Base):
    """A ledger home (a directory of run records) indexed into this database."""

    __tablename__ = "homes"

    home_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    path: Mapped[str] = mapped_column(Text)
    added_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_indexed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # migration 0006: one row per *location* of a home: its id (home-id.json), the machine and
    # the path (a row written before 0006 has neither until a machine adopts it)
    uid: Mapped[str | None] = mapped_column(Text)
    machine: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (UniqueConstraint("uid", "machine", "path", name="uq_homes_location"),)


class Run(Base):
    """One readable run record: manifest fields, settlement, reduced usage, evidence gaps."""

    __tablename__ = "runs"

    home_id: Mapped[int] = mapped_column(ForeignKey("homes.home_id", ondelete="CASCADE"), primary_key=True)
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    parent_run_id: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    ended_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    duration_ms: Mapped[int | None] = mapped_column(BigInteger)
    harness: Mapped[str] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    surface: Mapped[str | None] = mapped_column(Text)
    # migration 0005: where the row comes from: `record` (a run record), `claude-log` or
    # `codex-log` (a client session from the archived logs, ledger/index/logsource.py)
    source: Mapped[str] = mapped_column(Text, server_default="record")
    repo: Mapped[str | None] = mapped_column(Text)
    worktree: Mapped[str | None] = mapped_column(Text)
    skill: Mapped[str | None] = mapped_column(Text)
    cwd: Mapped[str | None] = mapped_column(Text)
    host: Mapped[str | None] = mapped_column(Text)
    boot_id: Mapped[str | None] = mapped_column(Text)
    launcher_pid: Mapped[int | None] = mapped_column(BigInteger)
    launcher_start_ticks: Mapped[int | None] = mapped_column(BigInteger)
    outcome: Mapped[str | None] = mapped_column(Text)
    settled: Mapped[bool] = mapped_column(Boolean)
    state: Mapped[str] = mapped_column(Text)
    evidence_gaps: Mapped[int] = mapped_column(Integer)
    usage_gaps: Mapped[int] = mapped_column(Integer)
    record_rewrites: Mapped[int] = mapped_column(Integer)
    streams: Mapped[int] = mapped_column(Integer)
    final_streams: Mapped[int] = mapped_column(Integer)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    total_input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    peak_input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    context_window_tokens: Mapped[int | None] = mapped_column(BigInteger)
    reasoning_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_5m_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_1h_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cost_usd: Mapped[float | None] = mapped_column(Double)
    provider_session_id: Mapped[str | None] = mapped_column(Text)
    final_answer: Mapped[str | None] = mapped_column(Text)
    final_answer_exact: Mapped[bool | None] = mapped_column(Boolean)
    api_retries: Mapped[int] = mapped_column(Integer)
    skill_invoked: Mapped[bool | None] = mapped_column(Boolean)
    # migration 0004: the verdict (ledger.records.verdict; None: no verdict yet) and the
    # tool results per status (a use without a result is unknown: tool_calls minus these)
    ok: Mapped[bool | None] = mapped_column(Boolean)
    error_kind: Mapped[str | None] = mapped_column(Text)
    error_detail: Mapped[str | None] = mapped_column(Text)
    tool_calls: Mapped[int] = mapped_column(Integer, server_default="0")
    tool_ok: Mapped[int] = mapped_column(Integer, server_default="0")
    tool_errors: Mapped[int] = mapped_column(Integer, server_default="0")
    tool_semantic_errors: Mapped[int] = mapped_column(Integer, server_default="0")
    # migration 0008: the redacted argv of the result event, shlex-joined for pasting into a
    # shell, and the child's exit code (None: not known, e.g. imported sessions)
    command: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    # migration 0010: the manifest's arm (`ledger run --arm`), a repeated trial's number (from
    # 1) and how many trials its repeat asked for (also on the repeat's parent, whose trial is None)
    arm: Mapped[str | None] = mapped_column(Text)
    trial: Mapped[int | None] = mapped_column(Integer)
    trials: Mapped[int | None] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    indexed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        Index("ix_runs_home_id_created_at", "home_id", "created_at"),
        Index("ix_runs_home_id_settled", "home_id", "settled"),
        Index("ix_runs_created_at", "created_at"),
        Index("ix_runs_model", "model"),
        Index("ix_runs_harness", "harness"),
        Index("ix_runs_skill", "skill"),
        Index("ix_runs_run_id", "run_id"),  # (0006: a run is counted once across homes)
        Index("ix_runs_home_id_parent_run_id", "home_id", "parent_run_id"),  # (0012: `show`'s children)
    )


def _run_fk(table: str) -> ForeignKeyConstraint:
    return ForeignKeyConstraint(["home_id", "run_id"], ["runs.home_id", "runs.run_id"],
                                ondelete="CASCADE", name=f"fk_{table}_run_runs")


class RunSubject(Base):
    """The manifest's subjects of a run, in manifest order (`position` from 0)."""

    __tablename__ = "subjects"

    home_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    selector: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text)

    __table_args__ = (_run_fk("subjects"), Index("ix_subjects_selector", "selector"))


class Attempt(Base):
    """Provider attempts of a run. Times are the events' `observed_at` text, verbatim."""

    __tablename__ = "attempts"

    home_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    attempt_key: Mapped[str] = mapped_column(Text, primary_key=True)
    provider: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[str | None] = mapped_column(Text)
    outcome: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (_run_fk("attempts"),)


class UsageStream(Base):
    """One usage stream (attempt, turn, model) after reduction: each counter's running max."""

    __tablename__ = "usage_streams"

    home_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    stream_id: Mapped[str] = mapped_column(Text, primary_key=True)
    provider: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(Text)
    attempt_key: Mapped[str | None] = mapped_column(Text)
    turn_key: Mapped[str | None] = mapped_column(Text)
    observations: Mapped[int] = mapped_column(Integer)
    final_receipt: Mapped[bool] = mapped_column(Boolean)
    input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    total_input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    peak_input_tokens: Mapped[int | None] = mapped_column(BigInteger)
    context_window_tokens: Mapped[int | None] = mapped_column(BigInteger)
    reasoning_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_read_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_5m_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_1h_tokens: Mapped[int | None] = mapped_column(BigInteger)
    cost_usd: Mapped[float | None] = mapped_column(Double)
    # migration 0005, archived sessions only (NULL for run records): the 15-minute slot the
    # usage belongs to (a session's usage is kept per model and slot, so a session spanning
    # days is reported on each day), and the estimate priced per API response (a long-context
    # tier depends on each request, not on a sum)
    slot: Mapped[int | None] = mapped_column(BigInteger)
    est_cost_usd: Mapped[float | None] = mapped_column(Double)

    __table_args__ = (_run_fk("usage_streams"), Index("ix_usage_streams_model", "model"))


class ToolUse(Base):
    """How many times a run used each tool (`tool_use` events per name)."""

    __tablename__ = "tool_uses"

    home_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    tool_name: Mapped[str] = mapped_column(Text, primary_key=True)
    uses: Mapped[int] = mapped_column(Integer)
    # migration 0004: results per status (uses minus these: no result seen, unknown)
    ok: Mapped[int] = mapped_column(Integer, server_default="0")
    errors: Mapped[int] = mapped_column(Integer, server_default="0")
    semantic_errors: Mapped[int] = mapped_column(Integer, server_default="0")

    __table_args__ = (_run_fk("tool_uses"), Index("ix_tool_uses_tool_name", "tool_name"))


class IndexCursor(Base):
    """The indexer's position in one record, committed in the same transaction as its rows.

    `status` is `indexed` (rows in `runs`) or `damaged` (`problem` says why; no rows).
    Signatures are `size:mtime_ns:inode` strings of the files; `events_offset` is just past
    the last complete line; `prefix_sha256` hashes the first `prefix_len` bytes of
    events.jsonl (to detect a rewrite); `fold_state` is the reducer's JSON state to resume from.
    """

    __tablename__ = "index_cursors"

    home_id: Mapped[int] = mapped_column(ForeignKey("homes.home_id", ondelete="CASCADE"), primary_key=True)
    run_id: Mapped[str] = mapped_column(Text, primary_key=True)
    shard: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text)
    problem: Mapped[str | None] = mapped_column(Text)
    problem_path: Mapped[str | None] = mapped_column(Text)
    settled: Mapped[bool] = mapped_column(Boolean)
    racy: Mapped[bool] = mapped_column(Boolean)
    dir_sig: Mapped[str | None] = mapped_column(Text)
    events_sig: Mapped[str | None] = mapped_column(Text)
    files_sig: Mapped[str | None] = mapped_column(Text)
    context_sig: Mapped[str | None] = mapped_column(Text)
    context_ok: Mapped[bool | None] = mapped_column(Boolean)
    events_ino: Mapped[int | None] = mapped_column(BigInteger)
    events_offset: Mapped[int] = mapped_column(BigInteger)
    torn: Mapped[bool] = mapped_column(Boolean)
    prefix_len: Mapped[int] = mapped_column(Integer)
    prefix_sha256: Mapped[str | None] = mapped_column(Text)
    record_rewrites: Mapped[int] = mapped_column(Integer)
    fold_state: Mapped[str | None] = mapped_column(Text)
    indexed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_index_cursors_home_id_status", "home_id", "status"),)


class IndexShard(Base):
    """The indexer's view of one shard directory (`runs/<xx>/`) of a home.

    `sealed`: when last scanned, every record in it was settled, damaged or abandoned (its
    launcher gone for good) and its files had been quiet for SEAL_GRACE. While the shard
    directory's signature (`dir_sig`) stays the same (a new or removed run changes it), a
    pass does not list a sealed shard: it stats only its damaged and abandoned records, whose
    change opens it again (ledger.index.sealing).
    """

    __tablename__ = "index_shards"

    home_id: Mapped[int] = mapped_column(ForeignKey("homes.home_id", ondelete="CASCADE"), primary_key=True)
    shard: Mapped[str] = mapped_column(Text, primary_key=True)
    dir_sig: Mapped[str | None] = mapped_column(Text)
    sealed: Mapped[bool] = mapped_column(Boolean)
    runs: Mapped[int] = mapped_column(Integer)


class LogSession(Base):
    """A client session found in a home's archived logs (migration 0005; ledger.index.logsource).

    Every session has a row here; its usage is in `runs` (source `claude-log`/`codex-log`,
    `run_id` = `row_id`) unless `ledger run` recorded the same provider session, in which case
    the run record is the evidence, `linked_run_id` names it and the session adds nothing
    to reports (counted once).
    """

    __tablename__ = "log_sessions"

    home_id: Mapped[int] = mapped_column(ForeignKey("homes.home_id", ondelete="CASCADE"), primary_key=True)
    row_id: Mapped[str] = mapped_column(Text, primary_key=True)  # `claude-<session id>`, `codex-<thread id>`
    source: Mapped[str] = mapped_column(Text)
    provider_session_id: Mapped[str] = mapped_column(Text)
    linked_run_id: Mapped[str | None] = mapped_column(Text)
    files: Mapped[int] = mapped_column(Integer)  # archive files holding its lines
    path: Mapped[str | None] = mapped_column(Text)  # its main archive file, below the home
    fingerprint: Mapped[int] = mapped_column(BigInteger)  # of its rows: unchanged sessions are not rewritten
    indexed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))

    __table_args__ = (Index("ix_log_sessions_provider_session_id", "provider_session_id"),)


class LogState(Base):
    """A client archive's reducer state and cursors (the bytes of each archive file read)."""

    __tablename__ = "log_state"

    home_id: Mapped[int] = mapped_column(ForeignKey("homes.home_id", ondelete="CASCADE"), primary_key=True)
    source: Mapped[str] = mapped_column(Text, primary_key=True)
    state: Mapped[str] = mapped_column(Text)
    indexed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


from ledger.index.tablenames import ALL_TABLES, DATA_TABLES, LOG_TABLES  # noqa: E402,F401 - the one list
from ledger.sqlviews import REPORT_VIEWS, VIEWS  # noqa: E402 - the one list
# Every `*_v` view: the stable SQL interface documented in docs/sql.md (tests/test_docs_views.py
# checks both the docs and the migrations against this list; `ledger sql`'s hints name them).
from ledger.sqlviews import DOCUMENTED_VIEWS  # noqa: E402,F401


# The report's derived tables are part of this schema (migrations 0002, 0003): declared next
# door, imported here so that Base.metadata is complete whoever imports the models.
from ledger.index import report_tables  # noqa: E402,F401
