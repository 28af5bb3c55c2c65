"""Two indexers (one of them rebuilding now and then) and readers, in parallel processes,
over a home that keeps growing: no error, no "database is locked", a correct final index."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from indexhelpers import append_usage, cli, make_run, records_runs_json, settle_run

CHILD = r"""
import sys, time
from ledger.index.ops import index_homes, reading, home_id
from ledger.index import queries
role, home, url, stop = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
import os
if role == "indexer":  # every pass through the worker processes (and their scratch files)
    from ledger.index import indexer
    indexer.PARALLEL_MIN = 1
    os.cpu_count = lambda: 2
n = 0
seen = 0
while not os.path.exists(stop):
    if role == "reader":
        with reading(url) as conn:
            snaps = queries.list_runs(conn, home_id(conn, home), True)
            assert len(snaps) >= seen, (len(snaps), seen)  # never a half (older/emptier) index
            seen = len(snaps)
            for s in snaps:
                assert s.id and s.started and s.usage.streams >= 0
    else:
        index_homes([home], url, rebuild=(role == "rebuilder" and n % 4 == 3))
    n += 1
print(role, n, flush=True)
"""


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_indexers_and_a_reader(home, tmp_path, backend, request):
    url = f"sqlite:///{home / 'index.sqlite'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    for _ in range(20):
        make_run(home)
    assert cli("index", "--db", url).exit_code == 0
    stop = tmp_path / "stop"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, role, str(home), url, str(stop)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for role in ("indexer", "rebuilder", "reader", "reader")]
    try:
        live = []
        deadline = time.monotonic() + 6
        i = 0
        while time.monotonic() < deadline:
            live.append(make_run(home, outcome=None))
            if len(live) > 3:
                r = live.pop(0)
                append_usage(r, 100 + i, 5)
                settle_run(r)
            i += 1
            time.sleep(0.02)
        for r in live:
            settle_run(r)
    finally:
        stop.touch()
        outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
        assert b"locked" not in err
        role, n = out.decode().split()
        assert int(n) >= 2, (role, n)
    final = cli("runs", "--json", "--all", "--db", url)
    assert final.exit_code == 0, final.output
    assert final.stdout == records_runs_json(home)
    if backend == "sqlite":
        assert not [p for p in os.listdir(home) if ".rebuild-" in p or ".corrupt-" in p
                    or p.startswith(".ledger-index-parts-")]
