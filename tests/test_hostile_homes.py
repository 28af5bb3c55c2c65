"""Issue 32: safe on a hostile machine, round 2 (homes, disks and stores that are not what
they seem). Every case: `Error:` + `Hint:` or a warning, never a traceback, and nothing
written outside the home, its index and the named store."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from indexhelpers import cli, make_run
from test_hostile_input import no_traceback, run_cli, tree_state


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("LEDGER_DB", "LEDGER_HOME", "LEDGER_STORE")}
    env.update(COLUMNS="100", **extra)
    return env


def ledger(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return run_cli([sys.executable, "-m", "ledger", *args], env=env or _env(), timeout=timeout)


def error_and_hint(res: subprocess.CompletedProcess) -> None:
    assert res.returncode == 1, (res.returncode, res.stdout[-2000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "Error: " in res.stderr and "\nHint: " in res.stderr, res.stderr


# ---------------------------------------------------------------- 1. symlinked shards

def symlink_shards(home: Path, elsewhere: Path) -> None:
    """Every shard runs/00..ff a symlink to a directory on another disk."""
    (home / "runs").mkdir(parents=True, exist_ok=True)
    for i in range(256):
        target = elsewhere / f"{i:02x}"
        target.mkdir(parents=True, exist_ok=True)
        os.symlink(target, home / "runs" / f"{i:02x}")


def test_a_run_is_refused_before_it_starts_when_its_shard_is_a_symlink(tmp_path):
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    make_run(home)  # a home with one run (its shard is real)
    real = {p.name for p in (home / "runs").iterdir()}
    for i in range(256):
        if f"{i:02x}" not in real:
            (elsewhere / f"{i:02x}").mkdir(parents=True)
            os.symlink(elsewhere / f"{i:02x}", home / "runs" / f"{i:02x}")
    marker = tmp_path / "child-ran"
    before = tree_state(elsewhere)
    for _ in range(5):  # (a run id lands in a random shard: 255 of 256 are links)
        res = ledger("run", "--home", str(home), "--", "touch", str(marker))
        if res.returncode == 0:
            continue
        error_and_hint(res)
        assert "is a symlink" in res.stderr and "runs/" in res.stderr
        assert not marker.exists(), "the child ran although its record could not be kept"
        break
    else:
        pytest.fail("five runs all landed in the one real shard")
    assert tree_state(elsewhere) == before, "a record was written through a symlinked shard"
    # the readers agree: what the writer kept is what they list
    res = ledger("runs", "--all", "--json", "--home", str(home))
    assert res.returncode == 0, res.stderr
    listed = {r["id"] for r in orjson.loads(res.stdout)}
    kept = {p.name for s in (home / "runs").iterdir() if not s.is_symlink() for p in s.iterdir()}
    assert listed == kept


def test_verify_does_not_count_symlinked_shards_as_runs(tmp_path):
    home = tmp_path / "home"
    shard = make_run(home).parent.name
    link = "ab" if shard != "ab" else "cd"
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", home / "runs" / link)
    res = ledger("verify", "--json", "--home", str(home))
    doc = orjson.loads(res.stdout)
    assert res.returncode == 1
    assert doc["runs"] == 1 and doc["ok"] == 1 and doc["shard_links"] == 1, doc
    assert [p["run_id"] for p in doc["problems"]] == [f"runs/{link}"]
    res = ledger("verify", "--home", str(home))
    assert "verified 1 run(s): 1 ok, 0 with problems; 1 symlinked shard(s) not followed" in res.stderr


# ---------------------------------------------------------------- 7, 8. bytes and numbers JSON cannot hold

def test_an_out_of_range_token_count_is_an_evidence_gap_and_nothing_is_lost(tmp_path):
    """Issue 32 item 8: 10**30 tokens (orjson cannot write it) used to drop that event (the
    final receipt) with a message saying no more events would be written, while later ones
    were: seq 5 -> 7, `completed`, 0 gaps, verify ok."""
    from ledger.records import RunCapture, read_run
    from ledger.verify import verify_run

    home = tmp_path / "home"
    with RunCapture(home, harness="claude") as run:
        attempt = run.start_attempt("anthropic", "claude-sonnet-4-5")
        stream = run.usage_stream(provider="anthropic", model="claude-sonnet-4-5", attempt_key=attempt,
                                  turn_key="turn-1")
        stream.observe({"input_tokens": 10, "output_tokens": 4})
        stream.observe({"input_tokens": 10, "output_tokens": 10**30, "cost_usd": 10**400}, final_receipt=True)
        run.emit("text", text="after")
    assert run.events.dropped == 0 and run.events.failed is None
    lines = (run.path / "events.jsonl").read_bytes().splitlines()
    seqs = [orjson.loads(line)["seq"] for line in lines]
    assert seqs == list(range(len(seqs))), seqs  # no hole
    snap = read_run(run.path)
    assert snap.usage.final_streams == 1  # the final receipt was kept
    assert snap.evidence_gaps >= 1 and snap.usage.output_tokens is None  # overflow: unknown, a gap
    v = verify_run(run.path)
    assert not v.ok and any("evidence gap" in p for p in v.problems), v.problems


def test_verify_finds_a_hole_in_seq_and_the_writer_says_what_it_left_out(tmp_path, caplog):
    from ledger.records import RunCapture
    from ledger.verify import verify_run

    home = tmp_path / "home"
    with RunCapture(home, harness="command") as run:
        run.emit("text", text="one")
        run.emit("text", text=object())  # a value no JSON holds: that event alone is left out
        run.emit("text", text="three")
    kept = [orjson.loads(line) for line in (run.path / "events.jsonl").read_bytes().splitlines()]
    assert [e.get("text") for e in kept if e["type"] == "text"] == ["one", "three"]
    hole = [e["seq"] for e in kept if e.get("text") == "three"][0] - 1
    said = caplog.text
    assert f"event seq {hole} (text)" in said and "the next events are still written" in said, said
    assert "without further events" not in said
    v = verify_run(run.path)
    assert not v.ok and f"events.jsonl: seq jumps from {hole - 1} to {hole + 1} (1 event(s) missing)" in v.problems


def test_bytes_that_are_not_utf8_in_an_option_are_a_usage_error(tmp_path):
    """Issue 32 item 7: `--skill $'sk\\x9b'` was `TypeError: str is not valid UTF-8`."""
    home = tmp_path / "home"
    make_run(home)
    bad = os.fsdecode(b"sk\x9b")
    for args in (("run", "--home", str(home), "--skill", bad, "--", "true"),
                 ("runs", "--home", str(home), "--skill", bad), ("report", "--home", str(home), "--subject", bad),
                 ("sql", "--home", str(home), f"SELECT '{bad}'"), ("show", "--home", str(home), bad),
                 ("index", "--home", str(home) + bad)):
        res = run_cli([sys.executable, "-m", "ledger", *args], env=_env())
        assert res.returncode == 2, (args, res.stderr)
        assert "Traceback" not in res.stderr, res.stderr
        assert "Error: " in res.stderr and "not valid UTF-8" in res.stderr and "\\x9b" in res.stderr, res.stderr
        assert "\nHint: " in res.stderr


def test_a_command_and_a_cwd_that_are_not_utf8_are_recorded_with_the_bytes_escaped(tmp_path):
    """The command after `--` is the child's: it gets the bytes as they are, and the record
    keeps them as the text `\\x9b` (every event after it still written)."""
    home = tmp_path / "home"
    cwd = tmp_path / os.fsdecode(b"dir\xff")
    cwd.mkdir()
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "ledger", "run", "--home", str(home), "--", "sh", "-c",
                          f'printf %s "$1" > {out}', "sh", os.fsdecode(b"arg\x9b")],
                         cwd=cwd, env=_env(), capture_output=True)
    assert res.returncode == 0, res.stderr
    assert out.read_bytes() == b"arg\x9b"
    assert b"cannot write" not in res.stderr, res.stderr
    res = ledger("runs", "--json", "--home", str(home))
    assert res.returncode == 0, res.stderr
    (doc,) = orjson.loads(res.stdout)
    assert "arg\\x9b" in doc["command"], doc["command"]
    assert doc["evidence_gaps"] == 0 and doc["outcome"] == "completed"
    res = ledger("verify", "--home", str(home))
    assert res.returncode == 0, res.stdout + res.stderr


# ---------------------------------------------------------------- 9. show's labels, sql's functions

def test_show_escapes_the_model_a_stream_id_carries(tmp_path):
    from ledger.records import RunCapture

    model = "m\x1b[31mred\x1b]8;;https://evil.example\x07x"
    home = tmp_path / "home"
    with RunCapture(home, harness="claude", model=model) as run:
        attempt = run.start_attempt("anthropic", model)
        run.usage_stream(provider="anthropic", model=model, attempt_key=attempt, turn_key="t1").observe(
            {"input_tokens": 1})
    res = run_cli([sys.executable, "-m", "ledger", "show", "--home", str(home), run.run_id], env=_env(), text=False)
    assert res.returncode == 0, res.stderr
    assert b"\x1b" not in res.stdout and b"\x07" not in res.stdout, res.stdout
    assert b"stream attempt-1/t1/m\\x1b[31mred" in res.stdout


@pytest.mark.parametrize("query", ["SELECT fts3_tokenizer('simple')", "SELECT hex(fts3_tokenizer('porter'))",
                                   "SELECT load_extension('x')", "SELECT 1 FROM runs_v WHERE fts3_tokenizer('simple')"])
def test_sql_denies_functions_that_reach_past_the_data(tmp_path, query):
    home = tmp_path / "home"
    make_run(home)
    res = cli("sql", query, "--home", str(home))
    no_traceback(res)
    assert res.exit_code == 1, res.output
    assert "Error: ledger sql is read-only: the function" in res.stderr and "\nHint: " in res.stderr
    ok = cli("sql", "SELECT upper(model) AS m FROM runs_v", "--json", "--home", str(home))
    assert ok.exit_code == 0 and orjson.loads(ok.stdout) == [{"m": "CLAUDE-SONNET-4-5"}], ok.output


# ---------------------------------------------------------------- 5, 6. a full disk, a read-only store

@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs (root only: CI runs as root). Skipped, saying why, where it cannot be mounted."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk is full; returns it (remove it to free the disk)."""
    filler = disk / "filler"
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    try:
        with open(filler, "ab") as f:
            while True:
                f.write(b"\0" * 512)
                f.flush()
    except OSError:
        pass
    return filler


def test_a_full_disk_is_answered_from_the_index_or_an_error_and_loses_nothing(small_disk):
    home = small_disk / "home"
    first = sorted(make_run(home).name for _ in range(12))
    env = _env(LEDGER_HOME=str(home))
    assert ledger("index", env=env).returncode == 0
    later = sorted(make_run(home).name for _ in range(3))  # not indexed yet
    records = {k: v for k, v in tree_state(home).items() if k.startswith("runs")}
    filler = fill(small_disk)
    show = first[0]
    for args in (("runs", "--all", "--json"), ("report", "--json"), ("report", "model"),
                 ("sql", "SELECT run_id FROM runs_v ORDER BY run_id", "--json"), ("show", show, "--json"),
                 ("homes", "list", "--json")):
        res = ledger(*args, env=env)
        assert "Traceback" not in res.stderr, (args, res.stderr[-3000:])
        assert res.returncode == 0, (args, res.stderr)
        if args[0] != "homes":
            assert "no space left on the disk" in res.stderr and "it may be stale" in res.stderr, (args, res.stderr)
        if args[0] == "runs":
            assert sorted(r["id"] for r in orjson.loads(res.stdout)) == first  # the index as it is
        if args[0] == "sql":
            assert [r["run_id"] for r in orjson.loads(res.stdout)] == first
    for args in (("index",), ("index", "--full"), ("index", "--rebuild")):
        res = ledger(*args, env=env)
        error_and_hint(res)
        assert "no space left on the disk" in res.stderr and "df -h" in res.stderr, res.stderr
        assert "setting it aside" not in res.stderr, res.stderr  # a full disk is not a damaged index
    assert not list(home.glob("index.sqlite.corrupt-*"))
    assert not list(home.glob(".ledger-index-parts-*")) and not list(home.glob("*.tmp"))
    assert {k: v for k, v in tree_state(home).items() if k.startswith("runs")} == records  # nothing lost
    filler.unlink()
    res = ledger("runs", "--all", "--json", env=env)
    assert res.returncode == 0 and "may be stale" not in res.stderr, res.stderr
    assert sorted(r["id"] for r in orjson.loads(res.stdout)) == sorted(first + later)
    assert ledger("verify", env=env).returncode == 0


def test_a_full_disk_with_no_index_yet_is_an_error_and_a_hint(small_disk):
    home = small_disk / "home"
    make_run(home)
    fill(small_disk)
    for args in (("runs",), ("report",), ("sql", "SELECT 1"), ("index",)):
        res = ledger(*args, env=_env(LEDGER_HOME=str(home)))
        error_and_hint(res)
        assert "no space left on the disk" in res.stderr, res.stderr
    assert not list(home.glob("index.sqlite.corrupt-*"))


def test_push_to_a_read_only_or_full_store_is_an_error_naming_it(small_disk, tmp_path):
    home, store = tmp_path / "home", small_disk / "store"
    make_run(home)
    env = _env()
    assert ledger("push", "--home", str(home), "--to", str(store), env=env).returncode == 0
    make_run(home)
    before = tree_state(store)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    try:
        res = ledger("push", "--home", str(home), "--to", str(store), env=env)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True)
    error_and_hint(res)
    assert f"cannot push to the record store {store}: a read-only file system" in res.stderr, res.stderr
    assert tree_state(store) == before
    # a full store: an error too, nothing left half-written under a temporary name
    big = make_run(home)
    (big / "streams").mkdir(exist_ok=True)
    (big / "streams" / "raw.jsonl").write_bytes(os.urandom(1 << 20))  # more than is left
    filler = fill(small_disk)
    os.truncate(filler, filler.stat().st_size - (256 << 10))  # ~256 KiB left: small files fit, the big one not
    res = ledger("push", "--home", str(home), "--to", str(store), env=env)
    error_and_hint(res)
    assert f"cannot push to the record store {store}: no space left on the disk" in res.stderr, res.stderr
    assert not [p for p in tree_state(store) if p.endswith(".push.tmp")]
    filler.unlink()
    (big / "streams" / "raw.jsonl").unlink()
    res = ledger("push", "--home", str(home), "--to", str(store), env=env)
    assert res.returncode == 0, res.stderr
    (dest,) = (store / "homes").iterdir()
    res = ledger("verify", "--home", str(dest), env=env)
    assert res.returncode == 0, res.stdout + res.stderr


# ---------------------------------------------------------------- 10, 11. copied homes, copied ids

def _run_ids(res: subprocess.CompletedProcess) -> list[str]:
    assert res.returncode == 0, res.stderr
    return sorted(r["id"] for r in orjson.loads(res.stdout))


def test_a_home_copied_with_its_index_reports_itself_and_names_the_original(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    mine = [make_run(a).name for _ in range(3)]
    assert ledger("report", "--home", str(a)).returncode == 0  # a's index, built at a's path
    shutil.copytree(a, b, symlinks=True)  # cp -a: the index comes along
    b_only = make_run(b).name
    a_later = [make_run(a).name for _ in range(2)]
    res = ledger("report", "--json", "--home", str(b))
    assert res.returncode == 0, res.stderr
    assert orjson.loads(res.stdout)["totals"]["runs"] == 4, res.stdout  # b's four runs, nothing of a's
    assert f"another home's index (it holds {a}" in res.stderr, res.stderr
    assert _run_ids(ledger("runs", "--all", "--json", "--home", str(b))) == sorted(mine + [b_only])
    homes = orjson.loads(ledger("homes", "list", "--json", "--home", str(b)).stdout)
    assert [h["path"] for h in homes] == [str(b)]
    # a's own index is a's, and goes on as before
    assert _run_ids(ledger("runs", "--all", "--json", "--home", str(a))) == sorted(mine + a_later)
    res = ledger("report", "--json", "--home", str(a))
    assert orjson.loads(res.stdout)["totals"]["runs"] == 5 and "another home" not in res.stderr


def test_push_refuses_a_home_carrying_a_copy_of_another_homes_id(tmp_path):
    a, b, store = tmp_path / "a", tmp_path / "b", tmp_path / "store"
    make_run(a)
    assert ledger("push", "--home", str(a), "--to", str(store)).returncode == 0
    shutil.copytree(a, b, symlinks=True)
    make_run(b)
    before = tree_state(store)
    res = ledger("push", "--home", str(b), "--to", str(store))
    error_and_hint(res)
    assert f"has the id of the home at {a}" in res.stderr and "move its home-id.json aside" in res.stderr
    assert tree_state(store) == before
    # an id file written before it said where it was made: the store knows where it was pushed from
    doc = orjson.loads((b / "home-id.json").read_bytes())
    (b / "home-id.json").write_bytes(orjson.dumps({k: v for k, v in doc.items() if k not in ("path", "machine")}))
    res = ledger("push", "--home", str(b), "--to", str(store))
    error_and_hint(res)
    assert f"pushed from {a}" in res.stderr, res.stderr
    assert tree_state(store) == before
    # the way out the hint gives: b gets an id of its own and is pushed as a home of its own
    (b / "home-id.json").rename(tmp_path / "b-home-id.json")
    assert ledger("index", "--home", str(b)).returncode == 0
    res = ledger("push", "--home", str(b), "--to", str(store))
    assert res.returncode == 0, res.stderr
    assert len(list((store / "homes").iterdir())) == 2
    assert ledger("push", "--home", str(a), "--to", str(store)).returncode == 0  # a is still a


# ---------------------------------------------------------------- 12. a store indexed at another mount path

def _ro(path: Path, *args: str) -> subprocess.CompletedProcess:
    """`ledger ARGS` with `path` mounted read-only (a private mount namespace; root)."""
    script = f'mount --bind "{path}" "{path}" && mount -o remount,bind,ro "{path}" && exec "{sys.executable}" -m ledger "$@"'
    return run_cli(["unshare", "-m", "sh", "-c", script, "sh", *args], env=_env())


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root for a read-only mount")
def test_a_store_indexed_at_another_mount_path_is_matched_by_id_and_said(tmp_path):
    home, old, new = tmp_path / "home", tmp_path / "mnt-a", tmp_path / "mnt-b"
    runs = sorted(make_run(home).name for _ in range(3))
    old.mkdir()
    assert ledger("push", "--home", str(home), "--to", str(old / "store")).returncode == 0
    assert ledger("report", "--home", str(old / "store")).returncode == 0  # STORE/index/, made at mnt-a
    old.rename(new)  # the share is mounted elsewhere now
    (dest,) = (new / "store" / "homes").iterdir()
    # read-only there: the index as it is, its rows found by the home's id, and said
    res = _ro(new, "runs", "--json", "--all", "--home", str(new / "store"))
    assert _run_ids(res) == runs
    said = f"holds no home at {dest}; it holds the same home id at {old / 'store' / 'homes' / dest.name}"
    assert said in res.stderr, res.stderr
    res = _ro(new, "show", runs[0], "--home", str(new / "store"))
    assert res.returncode == 0 and said in res.stderr, res.stderr
    res = _ro(new, "report", "--json", "--home", str(new / "store"))
    assert res.returncode == 0 and said in res.stderr, res.stderr
    assert orjson.loads(res.stdout)["totals"]["runs"] == 3
    # writable: the store's own index, made at the old path, is rebuilt at this one
    res = ledger("runs", "--json", "--all", "--home", str(new / "store"))
    assert _run_ids(res) == runs and "another home's index" in res.stderr, res.stderr
    res = ledger("runs", "--json", "--all", "--home", str(new / "store"))
    assert _run_ids(res) == runs and "holds no home" not in res.stderr and "another home" not in res.stderr


# ---------------------------------------------------------------- acceptance: nothing outside is touched

def sandbox_state(root: Path, mine: list[Path]) -> dict[str, tuple]:
    """Every path under `root` except those below `mine` (the homes, their indexes, the named
    store): type, mode, content hash and mtime (files), target (links)."""
    skip = [os.path.relpath(p, root) for p in mine]
    state = {}
    for rel, v in tree_state(root).items():
        if any(rel == s or rel.startswith(s + os.sep) for s in skip):
            continue
        p = root / rel
        state[rel] = v + ((os.lstat(p).st_mtime_ns,) if v[0] == "file" else ())
    return state


def hostile_homes(t: Path) -> tuple[dict[str, Path], Path, dict[str, str]]:
    """Homes that are not what they seem, next to things that are not ledger's: symlinked
    shards, a symlinked directory in sources/, a home copied with its index, a home carrying
    another home's id. Returns the homes, the store and the environment."""
    import claudehistory

    out = t / "outside"
    (out / "project").mkdir(parents=True)
    (out / "project" / "main.py").write_text("print('mine')\n")
    user = t / "user"  # HOME, the client's logs, the platform's data dir: read, never written
    claudehistory.generate(user / ".claude", sessions=2, seed=1)
    env = _env(HOME=str(user), CLAUDE_CONFIG_DIR=str(user / ".claude"), CODEX_HOME=str(user / ".codex"),
               GEMINI_CLI_HOME=str(user), XDG_DATA_HOME=str(user / ".local" / "share"))
    homes: dict[str, Path] = {}
    # the original of the copies, with its index and id: outside of every command below
    orig = t / "orig"
    for _ in range(3):
        make_run(orig)
    assert ledger("index", "--home", str(orig), env=env).returncode == 0
    # symlinked shards (all but the ones holding runs), one with a record in its target
    h = homes["shards"] = t / "shards"
    make_run(h)
    target = out / "elsewhere"
    for i in range(256):
        name = f"{i:02x}"
        if not (h / "runs" / name).exists():
            (target / name).mkdir(parents=True)
            os.symlink(target / name, h / "runs" / name)
    shutil.copytree(orig / "runs" / next(iter(os.listdir(orig / "runs"))), target / "ab", dirs_exist_ok=True)
    # a directory of sources/ replaced by a symlink to a copy outside the home
    h = homes["sources"] = t / "sources"
    make_run(h)
    assert ledger("import", "claude", "--home", str(h), env=env).returncode == 0
    project = next((h / "sources" / "claude" / "projects").iterdir())
    shutil.copytree(project, out / "archive-copy")
    shutil.rmtree(project)
    os.symlink(out / "archive-copy", project)
    claudehistory.generate(user / ".claude", sessions=2, seed=2)  # new logs for the next import
    # a home copied with its index (cp -a), and one carrying a copy of another home's id
    homes["copy"] = t / "copy"
    shutil.copytree(orig, homes["copy"], symlinks=True)
    make_run(homes["copy"])
    h = homes["foreign-id"] = t / "foreign-id"
    make_run(h)
    shutil.copy2(orig / "home-id.json", h / "home-id.json")
    return homes, t / "store", env


def every_command(home: Path, store: Path, run_id: str) -> list[tuple[str, ...]]:
    h = ("--home", str(home))
    return [("run", *h, "--", "true"), ("runs", *h), ("runs", "--all", "--json", *h), ("show", run_id, *h),
            ("show", run_id, "--json", "--events", *h), ("report", *h), ("report", "model", "--json", *h),
            ("report", "session", *h), ("sql", "SELECT run_id, home FROM runs_v", *h), ("index", *h),
            ("index", "--full", "--json", *h), ("index", "--rebuild", *h), ("import", *h), ("import", "claude", *h),
            ("verify", *h), ("verify", "--json", *h), ("db", "check", *h), ("db", "current", *h), ("db", "upgrade", *h),
            ("homes", "list", *h), ("push", "--to", str(store), *h), ("push", "--full", "--json", "--to", str(store), *h),
            ("demo", *h), ("runs", "--source", "claude-log", "--json", *h)]


HOSTILE = ["shards", "sources", "copy", "foreign-id"]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_no_command_writes_outside_the_home_its_index_and_the_store(tmp_path, hostile):
    """Issue 32's acceptance: every command against every hostile home creates, renames and
    writes nothing outside the home, its index and the named store (a snapshot of the whole
    sandbox, every path, mode, hash and mtime, before and after each command). Every hostile
    home is in the sandbox of each case; the commands run against one of them."""
    homes, store, env = hostile_homes(tmp_path)
    mine = list(homes.values()) + [store]
    for name, home in [(hostile, homes[hostile])]:
        run_id = sorted(p.name for s in (home / "runs").iterdir() if not s.is_symlink() for p in s.iterdir())[0]
        for cmd in every_command(home, store, run_id):
            before = sandbox_state(tmp_path, mine)
            res = run_cli([sys.executable, "-m", "ledger", *cmd], env=env, timeout=300)
            assert "Traceback" not in res.stderr, (name, cmd, res.stderr[-3000:])
            assert res.returncode in (0, 1), (name, cmd, res.returncode, res.stderr[-2000:])
            if res.returncode == 1 and cmd[0] not in ("verify", "db"):
                assert "Error: " in res.stderr and "Hint: " in res.stderr, (name, cmd, res.stderr)
            after = sandbox_state(tmp_path, mine)
            changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
            assert not changed, f"{name}: `ledger {' '.join(cmd[:3])}` changed {changed[:10]} outside"


@pytest.mark.parametrize("room", [0, 64 * 1024])
def test_an_import_on_a_full_disk_says_so_and_leaves_no_temporary_file(small_disk, tmp_path, room):
    """`ledger import` on a disk that fills (at once, or part-way through the archive): an
    `Error:` + `Hint:`, and no `.*.tmp` of its own left in the home (a state file's write that
    fails removes its tmp); the next import, with room again, archives everything."""
    import claudehistory

    logs = tmp_path / "user" / ".claude"
    claudehistory.generate(logs, sessions=3, seed=5)
    home = small_disk / "home"
    env = _env(LEDGER_HOME=str(home))
    assert ledger("import", "claude", "--from", str(logs), env=env).returncode == 0  # a home with state files
    claudehistory.generate(tmp_path / "more" / ".claude", sessions=3, seed=6)
    for p in (tmp_path / "more" / ".claude").rglob("*.jsonl"):  # new logs beside the archived ones
        dest = logs / p.relative_to(tmp_path / "more" / ".claude")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest)
    filler = fill(small_disk)
    if room:
        os.truncate(filler, max(0, filler.stat().st_size - room))
    res = ledger("import", "claude", "--from", str(logs), env=env)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    if res.returncode != 0:
        error_and_hint(res)
        assert "no space left on the disk" in res.stderr, res.stderr
    assert not [p for p in home.rglob("*.tmp")], sorted(str(p) for p in home.rglob("*.tmp"))
    filler.unlink()
    res = ledger("import", "claude", "--from", str(logs), env=env)
    assert res.returncode == 0, res.stderr
    assert not [p for p in home.rglob("*.tmp")]
