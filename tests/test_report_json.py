"""`ledger report --json` is written without orjson (ledger.report.render.json_document, issue
15: a warm report): the bytes are orjson's, `OPT_INDENT_2`, for any document; what orjson
writes its own way or refuses goes to orjson itself."""

from __future__ import annotations

import math
import random
import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.report.render import json_document


def orjson_bytes(doc):
    try:
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n"
    except Exception as exc:  # noqa: BLE001 - compared as its type
        return type(exc)


def ours(doc):
    try:
        return json_document(doc)
    except Exception as exc:  # noqa: BLE001
        return type(exc)


scalars = (st.none() | st.booleans() | st.floats(allow_nan=True, allow_infinity=True)
           | st.integers(min_value=-(1 << 70), max_value=1 << 70) | st.text()
           | st.sampled_from([-(1 << 63), -(1 << 63) - 1, (1 << 64) - 1, 1 << 64, 0.00001, 1e-5 * 9.9, 1e16, -0.0]))
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=30)


@settings(max_examples=1500, deadline=None)
@given(documents)
def test_any_document_is_written_as_orjson_writes_it(doc):
    assert ours(doc) == orjson_bytes(doc)


def test_floats_are_written_as_orjson_writes_them():
    rnd = random.Random(15)
    values = [struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(100_000)]
    values += [rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-30, 30) for _ in range(50_000)]
    values += [round(rnd.random() * 10.0 ** rnd.randint(-8, 4), 10) for _ in range(50_000)]  # (report costs)
    values += [s * m * 10.0 ** e for e in range(-330, 309) for m in (1.0, 1.5, 9.999999999999999)
               for s in (1, -1)]
    values = [v for v in values if math.isfinite(v)]
    got = json_document(values)
    assert got == orjson_bytes(values)


@pytest.mark.parametrize("doc", [
    "\ud800",  # a lone surrogate: orjson refuses it
    {1: "a"},  # a key that is not a string
    (1, 2),  # a tuple: orjson's own way
    [[[]]] * 3, {"a": {"b": {}}},
    ["\x00\x1f\x7f\u2028\"\\/é漢🙂"],
])
def test_what_orjson_does_its_own_way_is_left_to_it(doc):
    assert ours(doc) == orjson_bytes(doc)


def test_deep_nesting_is_refused_as_orjson_refuses_it():
    for depth in (253, 254, 255, 256):
        doc: list = []
        for _ in range(depth):
            doc = [doc]
        assert ours(doc) == orjson_bytes(doc), depth


def test_a_real_report_is_the_same_document(tmp_path):
    """Every kind of report of a generated history, as print_json wrote it."""
    import claudehistory
    from ledger.report.query import ReportQuery
    from ledger.report.buckets import resolve_zone
    from ledger.report.render import to_json
    from ledger.report.service import build_reports
    from ledger.sources.archive import import_client
    from ledger.sources.logdirs import CLIENTS

    from indexhelpers import make_run

    claudehistory.generate(tmp_path / "claude", sessions=12, seed=3)
    home = tmp_path / "home"
    make_run(home, skill="review", cost=0.000012345)
    make_run(home, model="no-such-model-x", cost=None, outcome="failed")
    import_client(home, CLIENTS["claude"], [tmp_path / "claude"])
    zone, name = resolve_zone("Asia/Kathmandu")
    queries = [ReportQuery(kind=k) for k in ("daily", "weekly", "monthly", "model", "session", "run", "skill")]
    queries += [ReportQuery(kind="daily", breakdown=True, zone=zone, zone_name=name), ReportQuery(kind="model", cost="reported")]
    for rep in build_reports(home, None, queries):
        assert rep.rows
        assert to_json(rep) == orjson.dumps(rep.to_dict(), option=orjson.OPT_INDENT_2) + b"\n"
