"""The report's tables, as the report reads them. They are declared with the index's schema
(ledger.index.report_tables) so that the index knows every table it owns without importing
the report (the layers in pyproject.toml)."""

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
