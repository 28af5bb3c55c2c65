"""Every documented view (ledger.index.models.DOCUMENTED_VIEWS) is described in the docs and
exists after migrating an empty SQLite index: the list, the docs and the schema agree."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from conftest import REPO
from ledger.index import db as dbmod
from ledger.index.models import DOCUMENTED_VIEWS, VIEWS
from ledger.index.report_tables import REPORT_VIEWS

# docs/sql.md is the SQL reference; the report's cost views are described with the report
# (docs/report.md, "The same with `ledger sql`"), which docs/sql.md's readers are sent to.
DOCS = ("docs/sql.md", "docs/report.md")


def _documents(text: str, view: str) -> bool:
    """A heading, a table row or a definition bullet that names the view."""
    name = re.escape(view)
    return bool(re.search(rf"^#+ .*`?\b{name}\b", text, re.M)
                or re.search(rf"^\|\s*`?{name}`?\s*\|", text, re.M)
                or re.search(rf"^- `{name}`:", text, re.M))


def test_the_list_is_the_index_views_and_the_report_views():
    assert DOCUMENTED_VIEWS == VIEWS + REPORT_VIEWS
    assert len(set(DOCUMENTED_VIEWS)) == len(DOCUMENTED_VIEWS)
    assert all(v.endswith("_v") for v in DOCUMENTED_VIEWS)


@pytest.mark.parametrize("view", DOCUMENTED_VIEWS)
def test_view_is_documented(view):
    texts = {d: (REPO / d).read_text() for d in DOCS}
    assert any(_documents(t, view) for t in texts.values()), f"{view} is not described in {' or '.join(DOCS)}"
    # the SQL reference at least names it (e.g. in its grants), so it can be found from there
    assert re.search(rf"\b{re.escape(view)}\b", texts["docs/sql.md"]), f"docs/sql.md never names {view}"


def test_index_views_have_a_section_in_the_sql_reference():
    text = (REPO / "docs/sql.md").read_text()
    for view in VIEWS:
        assert re.search(rf"^### `{re.escape(view)}`", text, re.M), view


def test_every_documented_view_exists_after_migration(tmp_path):
    eng = dbmod.engine(f"sqlite:///{tmp_path / 'index.sqlite'}", mode="write")
    try:
        with eng.connect() as conn:
            with conn.begin():
                dbmod.upgrade(conn)
            with conn.begin():
                assert set(DOCUMENTED_VIEWS) <= set(sa.inspect(conn).get_view_names())
                for view in DOCUMENTED_VIEWS:  # each one answers (empty on an empty index)
                    assert conn.exec_driver_sql(f"SELECT * FROM {view}").fetchall() == []
    finally:
        eng.dispose()
