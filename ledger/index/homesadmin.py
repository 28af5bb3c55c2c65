"""The services of `ledger homes`: the homes an index holds, and forgetting one of them (its
rows go; its records are never touched).
"""

from __future__ import annotations

from typing import Any

from ledger.index import db as dbmod
from ledger.index import homes as homes_mod
from ledger.index import pglocks
from ledger.index.db import IndexError_, Notify
from ledger.index.ops import read_only_failure, reading, writing


def _quiet(_msg: str) -> None:
    pass


def homes_list(url: str) -> list[dict[str, Any]]:
    with reading(url) as conn:
        return homes_mod.listing(conn)


def homes_forget(url: str, selector: str, notify: Notify = _quiet) -> dict[str, Any]:
    """Remove the home `selector` names (one row) from the index: {id, home_id, path, runs}."""
    try:
        return _forget(url, selector, notify)
    except IndexError_:
        raise
    except Exception as exc:  # noqa: BLE001 - only a failure to write is answered here
        why = read_only_failure(exc)
        if why is None:
            raise
        raise IndexError_(f"cannot change the index {dbmod.redact_url(url)}: {why.strip().splitlines()[0]}",
                          hint="run `ledger homes forget` as the owner of ledger's tables") from None


def _forget(url: str, selector: str, notify: Notify) -> dict[str, Any]:
    with writing(url) as conn:
        ids = homes_mod.select_rows(conn, selector)
        if not ids:
            raise IndexError_(f"no home {selector!r} in the index {dbmod.redact_url(url)}",
                              hint="`ledger homes list` shows its homes (forget one by its id, home id or path)")
        if len(ids) > 1:
            raise IndexError_(f"{selector!r} names {len(ids)} homes of the index (ids {', '.join(map(str, ids))})",
                              hint="forget one by its id from `ledger homes list`")
        row = next(h for h in homes_mod.listing(conn) if h["id"] == ids[0])
        if conn.dialect == "postgresql":  # (not while a pass of that home is writing)
            with pglocks.held(conn, (pglocks.HOME_NS, ids[0]), f"the home {row['path']} in the index",
                              pglocks.DEFAULT_TIMEOUT, notify, xact=True):
                runs = homes_mod.forget(conn, ids[0])
        else:
            runs = homes_mod.forget(conn, ids[0])
    return {"id": ids[0], "home_id": row["home_id"], "machine": row["machine"], "path": row["path"], "runs": runs}
