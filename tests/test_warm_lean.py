"""The shortcuts a warm `ledger report` takes to import less (issue 15) answer as what they
replace: records written out instead of @dataclass (ledger.plainclass), the canonical home id
without uuid, SHA-256 without OpenSSL, UTC without the zone database, the log state read from
its two ends."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import pickle
import random
import uuid
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import orjson
import pytest

from ledger.index import fresh
from ledger.index.fresh import IndexSummary
from ledger.report.query import Report, ReportQuery
from ledger.report.sqltext import Sql
from ledger.report.buckets import Buckets, make_buckets, resolve_zone
from ledger.store.summary import PushSummary
from ledger.store.walk import _Item

RECORDS = [  # (the class, values, a field to replace)
    (ReportQuery, dict(kind="model", since=date(2026, 1, 2), filters={"model": ["x*"]}, limit=3), "limit"),
    (Report, dict(query=ReportQuery(), rows=[{"key": "a"}], totals={"runs": 1}, pricing={}, seconds=0.5), "seconds"),
    (Sql, dict(text="a = ?", params=(1,)), "text"),
    (Buckets, dict(starts=[0, 86400], labels=["1970-01-01"], slot=86400), "slot"),
    (IndexSummary, dict(db="d", homes=["/h"], new=2, seconds=1.5), "new"),
    (PushSummary, dict(home="/h", home_id="i", dest="/d", copied=3, conflicts=[{"path": "p"}]), "copied"),
    (_Item, dict(rel="runs/x", kind="once", ready=False), "rel"),
]


@pytest.mark.parametrize("cls,values,k", RECORDS, ids=lambda x: getattr(x, "__name__", ""))
def test_a_written_out_record_behaves_as_its_dataclass(cls, values, k):
    twin = dataclasses.make_dataclass(cls.__name__, list(cls.__slots__), frozen=cls is Sql)
    a = cls(**values)
    t = twin(**{n: getattr(a, n) for n in cls.__slots__})
    assert repr(a) == repr(t)
    assert a == cls(**values) and not (a != cls(**values)) and a != t
    assert dataclasses.is_dataclass(a) and [f.name for f in dataclasses.fields(cls)] == list(cls.__slots__)
    assert dataclasses.asdict(a) == dataclasses.asdict(t)
    changed = dataclasses.replace(a, **{k: getattr(a, k) * 2})
    assert type(changed) is cls and getattr(changed, k) == getattr(a, k) * 2 and changed != a
    assert copy.deepcopy(a) == a and pickle.loads(pickle.dumps(a)) == a
    if cls is Sql:  # frozen: hashable, not assignable
        assert hash(a) == hash(t)
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.text = "b"
    else:
        with pytest.raises(TypeError):
            hash(a)
        setattr(a, k, getattr(a, k))


@pytest.mark.parametrize("make", [ReportQuery, IndexSummary, lambda: PushSummary("/h", "i", "/d"),
                                  lambda: Report(ReportQuery(), [], {}, {})])
def test_a_default_list_is_a_new_one_for_each_record(make):
    one, two = make(), make()
    defaults = [k for k in type(one).__slots__ if isinstance(getattr(one, k), (list, dict))]
    assert defaults and not [k for k in defaults if getattr(one, k) is getattr(two, k)]


def test_a_report_query_still_checks_itself():
    from ledger.report.buckets import ReportError

    assert ReportQuery(kind="skill").evaluation is True and ReportQuery().evaluation is False
    with pytest.raises(ReportError):
        ReportQuery(kind="hourly")
    with pytest.raises(ReportError):
        dataclasses.replace(ReportQuery(), cost="free")


def test_the_home_id_is_canonical_without_uuid():
    from ledger.home import canonical_uuid

    ids = [str(uuid.uuid4()) for _ in range(200)]
    for v in ids + [i.upper() for i in ids[:5]] + ["{" + ids[0] + "}", "urn:uuid:" + ids[1], uuid.UUID(ids[2]).hex]:
        assert canonical_uuid(v) == str(uuid.UUID(v))
    for bad in ("", "x" * 36, ids[0][:-1] + "g", ids[0].replace("-", "_"), ids[0] + "0"):
        with pytest.raises(ValueError):
            canonical_uuid(bad)
    with pytest.raises(TypeError):
        canonical_uuid(None)  # type: ignore[arg-type]


def test_the_machine_hash_is_sha256():
    from ledger.home import _sha256

    for data in (b"", b"abc", bytes(range(256)) * 40):
        assert _sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("name", ["UTC", "utc", "Z"])
def test_a_utc_report_zone_is_fixed_utc_with_the_same_buckets(name):
    zone, label = resolve_zone(name, fixed_utc=True)
    assert (zone, label) == (timezone.utc, "UTC")
    assert resolve_zone(name) == (ZoneInfo("UTC"), "UTC")  # (the function's own answer is unchanged)
    assert resolve_zone(None, env={"TZ": ":UTC"}, fixed_utc=True) == (timezone.utc, "UTC")
    first = datetime(2025, 12, 29, 13, tzinfo=timezone.utc)
    for period in ("daily", "weekly", "monthly"):
        for week_start in ("monday", "sunday"):
            last = first + timedelta(days=400)
            assert (make_buckets(first, last, zone, period, week_start)
                    == make_buckets(first, last, ZoneInfo("UTC"), period, week_start))
    assert resolve_zone("Asia/Tokyo", fixed_utc=True) == (ZoneInfo("Asia/Tokyo"), "Asia/Tokyo")


def test_the_log_state_is_read_from_its_ends_as_json_reads_it():
    rnd = random.Random(4)
    marker = "1796128831122055415:20:2162417"
    for _ in range(300):
        files = {f"projects/p{rnd.randint(0, 9)}/{rnd.random()}\"\\\u00e9.jsonl": [rnd.randint(0, 9), 7]
                 for _ in range(rnd.randint(0, 3))}
        doc = {"v": rnd.choice([1, 1, 2]), "rv": rnd.choice([1, 3]), "files": files,
               "marker": rnd.choice([marker, marker[:-1], "1:2:3"])}
        if rnd.random() < 0.2:
            doc = {k: doc[k] for k in rnd.sample(list(doc), len(doc))}  # (another order: parsed)
        if rnd.random() < 0.1:
            del doc["marker"]
        if rnd.random() < 0.1:
            doc["files"] = {"marker": marker}
        state = orjson.dumps(doc).decode()
        for rv in (1, 3):
            cur = orjson.loads(state)
            says = cur.get("v") == 1 and cur.get("rv") == rv and cur.get("marker") == marker
            # reading the ends never says more than parsing does; it says as much for the layout the pass writes
            assert fresh._state_says(state, rv, marker) <= says
            if list(doc) == ["v", "rv", "files", "marker"]:
                assert fresh._state_says(state, rv, marker) == says


def test_the_log_state_versions_are_the_indexers():
    from ledger.index import logclients, logsource, sourcelist

    assert fresh.LOG_STATE_FORMAT == logsource.STATE_V
    assert fresh.LOG_STATE_V == {s.client: logclients.state_v(s.client) for s in sourcelist.SOURCES
                                 if isinstance(s, logsource.LogSource)}
