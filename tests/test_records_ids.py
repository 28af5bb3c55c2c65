"""Run ids: minted form, strict parsing (four UUID spellings, verbatim), selector resolution."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import recordkit as rk
from ledger.errors import AmbiguousRun, LedgerError, RunNotFound
from ledger.records import mint_run_id, parse_run_id, publish_run, resolve_selector, run_dir
from ledger.records.ids import InvalidRunId, is_run_id, shard_of

HEX = "3f2a6c1e9b0d4e5fa7c8112233445566"
HYPH = "3f2a6c1e-9b0d-4e5f-a7c8-112233445566"


def test_minted_id_is_run_underscore_and_32_lowercase_hex():
    ids = {mint_run_id() for _ in range(200)}
    assert len(ids) == 200
    for rid in ids:
        assert re.fullmatch(r"run_[0-9a-f]{32}", rid), rid
        assert len(rid) == 36
        assert parse_run_id(rid) == rid
        assert rid[4 + 12] == "4"  # uuid4: version nibble


@pytest.mark.parametrize("text", [
    "run_" + HEX,                      # simple
    "run_" + HEX.upper(),              # simple, upper-case hex
    "run_" + HYPH,                     # hyphenated
    "run_" + HYPH.upper(),
    "run_urn:uuid:" + HYPH,            # urn
    "run_urn:uuid:" + HYPH.upper(),
    "run_{" + HYPH + "}",              # braced
    "run_{" + HYPH.upper() + "}",
    "run_3F2a6C1e9b0d4e5fA7c8112233445566",  # mixed case
])
def test_parse_accepts_the_four_uuid_spellings_verbatim(text):
    assert parse_run_id(text) == text  # kept verbatim, never normalised
    assert is_run_id(text)


@pytest.mark.parametrize("text", [
    "RUN_" + HEX,                       # prefix is case-sensitive
    "Run_" + HEX,
    "run" + HEX,
    "run-" + HEX,
    "run_" + HEX[:31],                  # 31 hex
    "run_" + HEX + "0",                 # 33 hex
    "run_" + HEX[:-1] + "g",            # not hex
    "run_" + HYPH + "x",                # uuid with an extra char
    "run_" + HYPH + "-",
    "run_x" + HYPH,
    "run_" + HEX + "\n",                # a trailing newline is an extra char too
    " run_" + HEX,
    "run_" + HEX + " ",
    "run_urn:uuid:" + HEX,              # urn must be hyphenated
    "run_URN:UUID:" + HYPH,
    "run_urn:uuid:{" + HYPH + "}",
    "run_{" + HEX + "}",                # braces need the hyphenated form
    "run_{" + HYPH,                     # unbalanced
    "run_" + HYPH + "}",
    "run_3f2a6c1e9b0d-4e5f-a7c8-112233445566",   # hyphens misplaced (Python's UUID() accepts these)
    "run_3f2a-6c1e-9b0d-4e5f-a7c8-1122-3344-5566",
    "run_",
    "",
    "run_" + "０" * 32,                  # non-ASCII digits
])
def test_parse_rejects_everything_else(text):
    assert not is_run_id(text)
    with pytest.raises(InvalidRunId) as info:
        parse_run_id(text)
    assert info.value.hint


def test_non_string_is_not_an_id():
    assert not is_run_id(None)  # type: ignore[arg-type]
    assert not is_run_id(123)  # type: ignore[arg-type]


def test_shard_is_the_two_characters_after_run_():
    assert shard_of("run_" + HEX) == "3f"
    assert shard_of("run_urn:uuid:" + HYPH) == "ur"
    assert shard_of("run_{" + HYPH + "}") == "{3"
    assert run_dir(Path("/h"), "run_" + HEX) == Path("/h/runs/3f/run_" + HEX)


# --- selector resolution --------------------------------------------------------------

@pytest.fixture
def three_runs(home):
    ids = ["run_aaaa1111" + "0" * 24, "run_aaaa2222" + "0" * 24, "run_bbbb" + "1" * 28]
    for rid in ids:
        publish_run(home, harness="command", run_id=rid, env={})
    # a staging directory and a stray file must never match
    (home / "runs" / "cc").mkdir(mode=0o700)
    (home / "runs" / "cc" / (".run_cccc" + "0" * 28 + ".staging")).mkdir(mode=0o700)
    (home / "runs" / "cc" / ("run_cccd" + "0" * 28)).write_text("not a dir")
    return ids


@pytest.mark.parametrize("sel", ["", "   ", "\t\n"])
def test_selector_empty(home, three_runs, sel):
    with pytest.raises(LedgerError) as info:
        resolve_selector(home, sel)
    assert info.value.message == "Run id cannot be empty"


def test_selector_not_found(home, three_runs):
    with pytest.raises(RunNotFound) as info:
        resolve_selector(home, "zzz")
    assert info.value.message == "Run zzz was not found"
    assert info.value.hint


def test_selector_ignores_staging_dirs_and_files(home, three_runs):
    for sel in ("cccc", "run_cccc", "cccd"):
        with pytest.raises(RunNotFound):
            resolve_selector(home, sel)


@pytest.mark.parametrize("sel", ["aaaa", "run_aaaa", "run_", "a"])
def test_selector_ambiguous(home, three_runs, sel):
    with pytest.raises(AmbiguousRun) as info:
        resolve_selector(home, sel)
    assert info.value.message == f"Run prefix {sel} is ambiguous"
    assert info.value.hint


@pytest.mark.parametrize("sel", ["aaaa1", "run_aaaa1", "  aaaa1  ", "aaaa1111" + "0" * 24, "run_aaaa1111" + "0" * 24])
def test_selector_resolves_with_and_without_run_prefix(home, three_runs, sel):
    assert resolve_selector(home, sel) == run_dir(home, three_runs[0])


def test_selector_in_a_home_without_runs(home):
    with pytest.raises(RunNotFound):
        resolve_selector(home, "abc")
    home.mkdir()
    (home / "runs").write_text("not a directory")
    with pytest.raises(RunNotFound):
        resolve_selector(home, "abc")


def test_publish_refuses_an_invalid_explicit_id(home):
    with pytest.raises(InvalidRunId):
        publish_run(home, harness="command", run_id="run_nope", env={})
