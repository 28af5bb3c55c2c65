"""ledger.index.tabledefs builds exactly the tables SQLAlchemy's ORM builds from the same
declarations (the schema modules are re-read with the ORM's names and both compared), and
no index module imports the ORM."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from ledger.index import models

INDEX = Path(models.__file__).parent


def _orm_metadata():
    """metadata.py, models.py and report_tables.py executed with sqlalchemy.orm's declarative
    base (metadata.py's Base put where models.py imports it)."""
    base = (INDEX / "metadata.py").read_text()
    base = base.replace("from ledger.index.tabledefs import TableClass",
                        "from sqlalchemy.orm import DeclarativeBase")
    base = base.replace("class Base(metaclass=TableClass):", "class Base(DeclarativeBase):")
    base = base.replace("from __future__ import annotations\n", "")
    src = (INDEX / "models.py").read_text()
    src = src.replace("from ledger.index.metadata import NAMING, Base  # noqa: F401 - (NAMING re-exported)\n", base)
    src = src.replace("from ledger.index.tabledefs import Mapped, mapped_column",
                      "from sqlalchemy.orm import Mapped, mapped_column")
    src = src.replace("from ledger.index import report_tables  # noqa: E402,F401", "")
    assert "TableClass" not in src and "DeclarativeBase" in src and "from sqlalchemy.orm import Mapped, mapped_column" in src
    # (the ORM resolves string annotations through sys.modules)
    mod = types.ModuleType("orm_models")
    sys.modules["orm_models"] = mod
    ns = mod.__dict__
    exec(compile(src, "orm_models", "exec"), ns)
    rsrc = (INDEX / "report_tables.py").read_text()
    rsrc = rsrc.replace("from ledger.index.tabledefs import Mapped, mapped_column",
                        "from sqlalchemy.orm import Mapped, mapped_column")
    rsrc = rsrc.replace("from ledger.index.metadata import Base\n", "")
    assert "tabledefs" not in rsrc and "ledger.index.metadata" not in rsrc
    rmod = types.ModuleType("orm_report_tables")
    sys.modules["orm_report_tables"] = rmod
    rns = rmod.__dict__
    rns.update(Base=ns["Base"], REPORT_VIEWS=ns["REPORT_VIEWS"])
    try:
        exec(compile(rsrc, "orm_report_tables", "exec"), rns)
    finally:
        del sys.modules["orm_models"], sys.modules["orm_report_tables"]
    return ns["Base"].metadata


def _describe(md) -> list[str]:
    out = []
    for name in sorted(md.tables):
        t = md.tables[name]
        for d in (sqlite.dialect(), postgresql.dialect()):
            out.append(str(CreateTable(t).compile(dialect=d)))
            out.extend(str(CreateIndex(ix).compile(dialect=d)) for ix in sorted(t.indexes, key=lambda i: i.name))
        out.append(repr([(c.name, c.key, repr(c.type), c.nullable, c.primary_key, c.autoincrement,
                          repr(c.server_default), c.default) for c in t.columns]))
        out.append(repr(dict(t.dialect_kwargs)))
        out.append(re.sub(r" at 0x[0-9a-f]+", "", repr(sorted(repr(x) for x in t.constraints))))
    return out


def test_same_tables_as_the_orm_builds():
    ours, orm = _describe(models.Base.metadata), _describe(_orm_metadata())
    assert len(ours) > 100
    assert ours == orm


def test_index_commands_do_not_import_the_orm():
    code = ("import sys, ledger.index.indexer, ledger.index.ops, ledger.report.sync, ledger.report.service; "
            "print('sqlalchemy.orm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_row_layouts_match_the_models():
    """The column orders the runtime writes rows in (it imports no model) are the models':
    a schema change cannot silently shift values into the wrong columns."""
    from ledger.index.logfeed import LOG_SESSION_COLS, LOG_STATE_COLS
    from ledger.index.project import EXPECTED_COLS, OUT_TABLES

    tables = models.Base.metadata.tables
    layouts = {**EXPECTED_COLS, "log_sessions": LOG_SESSION_COLS, "log_state": LOG_STATE_COLS}
    assert {n: tuple(c.name for c in tables[n].columns) for n in layouts} == layouts
    # (the run records' tables in write order, the cursor last)
    assert OUT_TABLES == ("runs", "subjects", "attempts", "usage_streams", "tool_uses", "index_cursors")
