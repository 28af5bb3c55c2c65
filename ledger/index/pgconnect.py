"""psycopg connections from ledger's server URLs (`postgresql+psycopg://user:pw@host:port/db?opt=v`),
without SQLAlchemy (issue 27): the URL read by SQLAlchemy's rules (make_url and its psycopg
dialect's connect arguments), so a URL that opens the index through an engine opens the same
database here, with the same options.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import parse_qsl, unquote

from ledger.index.db import URL_HINT, IndexError_, cannot_connect, redact_url

# SQLAlchemy's URL pattern (sqlalchemy.engine.url._parse_url)
_URL = re.compile(r"""
    (?P<name>[\w\+]+)://
    (?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?
    (?:(?:\[(?P<ipv6host>[^/\?]+)\]|(?P<ipv4host>[^/:\?]+))?(?::(?P<port>[^/\?]*))?)?
    (?:/(?P<database>[^\?]*))?
    (?:\?(?P<query>.*))?
    """, re.X)
_HOST_PORT = re.compile(r"^([a-zA-Z0-9\-\.]*)(?:\:(\d*))?$")


def _refused(url: str, why: str) -> IndexError_:
    return IndexError_(f"cannot open the index {redact_url(url)}: {why}", hint=URL_HINT)


def dialect(url: str) -> tuple[str, str]:
    """(database, driver) of a URL: `postgresql+psycopg` -> (postgresql, psycopg)."""
    name, _, driver = url.split("://", 1)[0].partition("+")
    return name, driver


def connect_params(url: str) -> dict[str, Any]:
    """psycopg.connect()'s keyword arguments for `url`: host, dbname, user, password, port
    (those given), then the query's options (`?sslmode=require&host=/run/postgresql`)."""
    m = _URL.match(url)
    if m is None:
        raise _refused(url, "Could not parse SQLAlchemy URL from given URL string")
    g = m.groupdict()
    params: dict[str, Any] = {}
    for key, value in (("host", g["ipv4host"] or g["ipv6host"]), ("dbname", g["database"]),
                       ("user", g["username"]), ("password", g["password"]), ("port", g["port"])):
        if value:
            params[key] = value if key in ("host", "port") else unquote(value)
    try:
        if "port" in params:
            params["port"] = int(params["port"])
    except ValueError as exc:
        raise _refused(url, str(exc)) from None
    query: dict[str, Any] = {}
    for key, value in parse_qsl(g["query"] or ""):
        query[key] = query[key] + [value] if isinstance(query.get(key), list) else \
            [query[key], value] if key in query else value
    params.update(query)
    _multihost(url, params, query)
    return params


def _multihost(url: str, params: dict[str, Any], query: dict[str, Any]) -> None:
    """The query's `host=h1:p1&host=h2:p2` (or one `host=h:p`) as libpq's `host=h1,h2 port=p1,p2`."""
    hosts = query.get("host")
    one = _HOST_PORT.match(hosts) if isinstance(hosts, str) and ":" in hosts and "," not in hosts else None
    if isinstance(hosts, list):
        pairs = [tuple(t.split(":")) if ":" in t else (t, "") for t in hosts]
    elif one is not None and "port" not in query:
        pairs = [one.groups("")]
    else:
        return
    if "port" in query:
        raise _refused(url, "Can't mix 'multihost' formats together; use \"host=h1,h2,h3&port=p1,p2,p3\" "
                            "or \"host=h1:p1&host=h2:p2&host=h3:p3\" separately")
    try:
        ports = ",".join(str(int(p[1])) if len(p) > 1 and p[1] else "" for p in pairs)
    except ValueError:
        raise _refused(url, f"Received non-integer port arguments: {tuple(p[1] if len(p) > 1 and p[1] else None for p in pairs)}") from None
    params["host"] = ",".join(p[0] for p in pairs)
    if ports:  # (as SQLAlchemy: "," for two hosts without a port)
        params["port"] = ports


def connect(url: str, **extra: Any) -> Any:
    """A psycopg connection to the database at `url` (outside any transaction: autocommit
    off, as psycopg opens it); `extra` adds or overrides connect arguments. Raises psycopg's
    errors; a URL for another driver is refused as the engine refuses it."""
    name, driver = dialect(url)
    if name == "postgresql" and driver not in ("", "psycopg"):
        raise IndexError_(f"cannot open the index {redact_url(url)}: its driver is not installed ({driver})",
                          hint="use postgresql+psycopg://user@host/db (psycopg 3 comes with ledger)")
    import psycopg

    return psycopg.connect(**{**connect_params(url), **extra})


@contextmanager
def opened(url: str) -> Iterator[Any]:
    """connect(url) for the block (its transaction rolled back, the connection closed after),
    with a connection failure (unreachable, no such database or role, bad password) as the
    IndexError_ the engine's connection gives (ledger.index.db.server_connection)."""
    import psycopg

    try:
        conn = connect(url)
    except psycopg.Error as exc:
        raise cannot_connect(url, exc) from None
    try:
        yield conn
    finally:
        conn.close()  # (what was not committed is rolled back)
