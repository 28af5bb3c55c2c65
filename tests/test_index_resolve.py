"""`ledger show`'s run selector on the index (ledger.index.queries.resolve): on SQLite each
prefix is a key range of the cursors' primary key; the answers are the substr rule's."""

from __future__ import annotations

import sqlite3

import pytest

from indexhelpers import cli, make_run
from ledger.errors import LedgerError
from ledger.index import db as dbmod
from ledger.index.dbapi import Conn
from ledger.index.queries import resolve


class _Generic(Conn):
    """The same SQLite connection through resolve's other branch (the server's query)."""

    def rows(self, sql, params=()):
        return self.raw.execute(sql, tuple(params)).fetchall()


def _answer(c, sel):
    try:
        return resolve(c, 1, sel)
    except LedgerError as exc:
        return type(exc).__name__


def test_every_selector_resolves_as_the_substr_rule_does(home):
    ids = sorted(make_run(home).name for _ in range(12))
    assert cli("index").exit_code == 0
    con = sqlite3.connect(dbmod.sqlite_path(dbmod.default_url(home)))
    fast, rule = Conn(con, "sqlite"), _Generic(con, "other")
    sels = {"run_", "r", "run_run_", "é", "run_é", "~", "run_~", "\x7f", "zz"}
    for rid in ids:
        bare = rid[len("run_"):]
        sels |= {rid, bare, rid[:5], bare[:1], bare[:2], bare[:6], rid + "0", bare.upper()}
    answers = {s: _answer(fast, s) for s in sorted(sels)}
    assert answers == {s: _answer(rule, s) for s in sorted(sels)}
    # (not vacuous: every id resolves, by itself and without `run_`; short prefixes collide)
    assert all(answers[r] == r and answers[r[4:]] == r for r in ids)
    assert answers["run_"] == "AmbiguousRun" and answers["é"] == "RunNotFound"
    con.close()


@pytest.mark.parametrize("sel", ["", "  "])
def test_an_empty_selector_is_an_error_with_a_hint(home, sel):
    make_run(home)
    assert cli("index").exit_code == 0
    con = sqlite3.connect(dbmod.sqlite_path(dbmod.default_url(home)))
    with pytest.raises(LedgerError) as e:
        resolve(Conn(con, "sqlite"), 1, sel)
    assert e.value.hint
