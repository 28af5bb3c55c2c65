"""How a stopped run settles (ledger.launch.stop.stop_exit): one rule for the headless and the
interactive launcher (their two copies had drifted: the interactive one let an agent killed by
SIGINT read as failed, and had no max-cost/needs-terminal codes)."""

from __future__ import annotations

import inspect
import signal

import pytest

from ledger.launch import interactive, settlement
from ledger.launch.stop import EXIT_STOPPED, STOP_REQUEST, stop_exit


@pytest.mark.parametrize("reason,by,rc,want", [
    ("timeout", "timeout", -15, ("interrupted", 124)),
    ("signal", "signal:SIGINT", -15, ("interrupted", 130)),
    ("signal", "signal:SIGHUP", 0, ("interrupted", 129)),
    ("max_cost", "max_cost", -9, ("interrupted", 125)),
    (STOP_REQUEST, "ledger stop by x", -15, ("interrupted", EXIT_STOPPED)),
    ("needs_terminal", "needs_terminal", -15, ("failed", 1)),
    (None, None, 0, (None, 0)),
    (None, None, 3, (None, 3)),
    (None, None, None, (None, 1)),
    (None, None, -signal.SIGINT, ("interrupted", 130)),
    (None, None, -signal.SIGTERM, ("interrupted", 143)),
    (None, None, -signal.SIGHUP, ("interrupted", 129)),
    (None, None, -signal.SIGKILL, (None, 137)),  # killed by someone else: the child's end decides
])
def test_a_stop_settles_by_one_rule(reason, by, rc, want):
    assert stop_exit(reason, by, rc) == want


def test_both_launchers_settle_a_stop_through_it():
    for fn in (settlement.HeadlessSettlement._settle, interactive._settle):
        src = inspect.getsource(fn)
        assert "stop_exit(stop_reason, child.stopped_by, rc)" in src
        assert "EXIT_STOPPED" not in src and "128 +" not in src
