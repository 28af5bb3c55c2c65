"""The report's tables, as the report reads them. They are declared with the index's schema
(ledger.index.report_tables) so that the index knows every table it owns without importing
the report (the layers in pyproject.toml). The plain-SQL writers (ledger.report.sync,
.fullsync, .quicksync) name their columns from ledger.report.schema instead: checked against
the models here (schema_disagreements, tests/test_quicksync.py)."""

from ledger.index.report_tables import (  # noqa: F401 - re-exported
    CHANGE_TRIGGERS,
    ESTIMATED,
    CELL_KINDS,
    GROUP_KINDS,
    GROUP_VALUES,
    GROUP_VERDICTS,
    MIXED,
    MODEL_MEASURES,
    REPORTED,
    REPORT_TABLES,
    REPORT_VIEWS,
    RUN_MEASURES,
    ReportChange,
    ReportDay,
    ReportFact,
    ReportGroup,
    ReportGroupDay,
    ReportSlot,
    ReportState,
    SLOT_SECONDS,
)


def schema_disagreements() -> list[str]:
    """Where ledger.report.schema (the plain writers' copy) differs from the models."""
    from ledger.index.models import COUNTER_COLUMNS
    from ledger.report import schema

    def names(model: type) -> tuple[str, ...]:
        return tuple(c.name for c in model.__table__.columns)

    return [name for name, mine, theirs in (
        ("COUNTER_COLUMNS", schema.COUNTER_COLUMNS, COUNTER_COLUMNS),
        ("report_facts", schema.FACT_COLUMNS, names(ReportFact)),
        ("report_groups", sorted(schema.GROUP_COLUMNS + [n for n, _ in schema.GROUP_VALUES]),
         sorted(names(ReportGroup))),
        ("report_group_days", tuple(schema.CELL_COLUMNS), names(ReportGroupDay)),
        ("report_slots", ("slot", "model_key") + tuple(m[0] for m in RUN_MEASURES + MODEL_MEASURES),
         names(ReportSlot)),
    ) if mine != theirs]
