"""The bucket store under the faults a real server cannot be made to show (issue 31): moto's
S3 server behind a proxy that throttles (503 SlowDown), fails (500) and loses the answer of a
conditional write that landed. Pushes and the central reader retry with backoff, stay
idempotent (the same objects as a push that met no fault), and give up with an error after a
bounded number of tries."""

from __future__ import annotations

import json
import time
from typing import Any

from bucketservers import moto_faulty  # noqa: F401 - the fixture
from ledger.bucket.client import Bucket
from ledger.home import read_home_uid
from test_push_bucket import make_home, run, totals


def objects(s3: Any, bucket: str, prefix: str) -> set[str]:
    return {k[len(prefix) + 1:] for k in s3.keys(bucket, prefix + "/") if "/objects/" in k}


def test_throttling_500s_and_lost_conditional_writes_are_retried_and_stay_idempotent(moto_faulty, tmp_path,  # noqa: F811
                                                                                     monkeypatch):
    s3 = moto_faulty
    bucket = s3.bucket("faults-31")
    home = make_home(tmp_path, 1, runs=6)
    run("push", "--home", str(home), "--to", f"s3://{bucket}/clean", env=s3.env())
    clean = objects(s3, bucket, "clean")
    assert len(clean) >= 6

    # the server refuses a create-only write on a taken key (what a lost write's retry meets)
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    b = Bucket(f"s3://{bucket}/clean")
    assert b.put_new("ledger-store.json", b"other bytes") is False

    f = s3.faults
    f.add("PUT", lambda path, h: "/objects/" in path, "throttle", 3)
    f.add("PUT", lambda path, h: "/objects/" in path, "error500", 2)
    f.add("PUT", lambda path, h: "/objects/" in path and h.get("if-none-match") == "*", "lost", 2)
    f.add("PUT", lambda path, h: "/log/" in path and h.get("if-none-match") == "*", "lost", 1)
    f.add("GET", lambda path, h: "list-type=2" in path, "throttle", 1)
    url = f"s3://{bucket}/faulty"
    doc = json.loads(run("push", "--home", str(home), "--to", url, "--json", env=s3.env()).stdout)
    assert f.hits == {"throttle": 4, "error500": 2, "lost": 3}
    assert doc["conflicts"] == [] and doc["copied"] > 0
    assert objects(s3, bucket, "faulty") == clean
    logs = [k for k in s3.keys(bucket, "faulty/") if "/log/" in k]
    assert len(logs) == 1

    again = json.loads(run("push", "--home", str(home), "--to", url, "--json", env=s3.env()).stdout)
    assert (again["copied"], again["bytes"]) == (0, 0)
    assert len([k for k in s3.keys(bucket, "faulty/") if "/log/" in k]) == 1

    # the central reader retries its GETs too, and replays the same records
    f.hits.clear()
    f.add("GET", lambda path, h: "/objects/" in path, "error500", 2)
    f.add("GET", lambda path, h: "/log/" in path, "throttle", 1)
    cache = str(tmp_path / "cache")
    doc = json.loads(run("index", "--home", url, "--json", env=s3.env(LEDGER_BUCKET_CACHE=cache)).stdout)
    assert f.hits == {"error500": 2, "throttle": 1}
    assert doc["stores"][0]["conflicts"] == []
    mirror = doc["stores"][0]["mirror"]
    assert totals(mirror, env=s3.env(LEDGER_BUCKET_CACHE=cache)) == totals(home)


def test_a_server_that_keeps_failing_is_an_error_after_bounded_tries_and_the_push_resumes(moto_faulty,  # noqa: F811
                                                                                          tmp_path):
    s3 = moto_faulty
    bucket = s3.bucket("faults-31b")
    home = make_home(tmp_path, 2, runs=4)
    run("push", "--home", str(home), "--to", f"s3://{bucket}/clean", env=s3.env())

    f = s3.faults
    f.rules.clear()
    f.add("PUT", lambda path, h: "/objects/" in path, "throttle", 1000)
    url = f"s3://{bucket}/stuck"
    t0 = time.monotonic()
    res = run("push", "--home", str(home), "--to", url, env=s3.env(AWS_MAX_ATTEMPTS="3"), code=1)
    assert time.monotonic() - t0 < 60
    assert "Error:" in res.stderr and "SlowDown after 3 tries" in res.stderr and "Hint:" in res.stderr
    assert not [k for k in s3.keys(bucket, "stuck/") if "/log/" in k]  # (nothing named that is not there)
    f.rules.clear()
    run("push", "--home", str(home), "--to", url, env=s3.env())
    assert objects(s3, bucket, "stuck") == objects(s3, bucket, "clean")
    uid = read_home_uid(home)
    assert [k for k in s3.keys(bucket, "stuck/") if "/log/" in k] == [f"stuck/homes/{uid}/log/000000000001.json"]
