"""A small side store of provider sessions' last cumulative usage: `$home/sessions/`.

Some providers report usage cumulatively over a whole session (Codex `turn.completed.usage`
is the thread's total; Claude Code's `modelUsage` / `total_cost_usd` after `--resume` cover
the whole session). To charge a resumed run only its own part, ledger remembers, per
(harness, provider session id), the cumulative figures the provider reported at the end of
the last recorded run, and subtracts them next time.

This store is a cache, not evidence: every figure it holds was also written into the run
record that observed it (the `result` event's `provider_cumulative`), and each run records
which previous figures it subtracted (`charged_since`). When the store has no entry for a
resumed session, the run's usage is recorded with `start_known: false` (an evidence gap)
instead of silently charging the whole session again.

Cumulative figures only grow, so an update keeps the max per field (a failed turn that
reports nothing must not reset a session's figures).

Layout: `sessions/<harness>/<safe id>.json`, JSON, 0600 files in 0700 directories,
replaced atomically (write a temp file, fsync, rename).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from ledger.records import jsonio
from ledger.records.timefmt import now_rfc3339

SCHEMA_VERSION = 1
_SAFE = re.compile(r"[A-Za-z0-9._\-]{1,128}\Z")


def _safe_name(session_id: str) -> str:
    if _SAFE.match(session_id) and not session_id.startswith("."):
        return session_id
    return "h-" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


class SessionStore:
    """Read and replace the last cumulative figures of provider sessions."""

    def __init__(self, home: str | os.PathLike[str]) -> None:
        self.root = Path(home) / "sessions"

    def path(self, harness: str, session_id: str) -> Path:
        return self.root / _safe_name(harness) / f"{_safe_name(session_id)}.json"

    def get(self, harness: str, session_id: str) -> dict[str, Any] | None:
        """The stored entry {session_id, run_id, updated_at, cumulative}, or None."""
        try:
            with open(self.path(harness, session_id), "rb") as f:
                data = jsonio.loads(f.read())
        except (OSError, jsonio.JSONDecodeError):
            return None
        if (not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION
                or data.get("session_id") != session_id or not isinstance(data.get("cumulative"), dict)):
            return None
        return data

    def put(self, harness: str, session_id: str, cumulative: dict[str, Any], run_id: str | None) -> bool:
        """Replace the entry atomically. Failures are reported (False), never raised."""
        target = self.path(harness, session_id)
        body = {"schema_version": SCHEMA_VERSION, "harness": harness, "session_id": session_id,
                "run_id": run_id, "updated_at": now_rfc3339(), "cumulative": cumulative}
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            for d in (self.root, target.parent):
                try:
                    os.mkdir(d, 0o700)
                except FileExistsError:
                    pass
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                data = memoryview(jsonio.dumps_pretty(body))
                while data:
                    data = data[os.write(fd, data):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)
            return True
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
