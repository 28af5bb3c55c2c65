"""One S3-compatible bucket, through boto3: the few calls the store makes, with bounded
retries and errors that say what to do. Credentials, region and endpoint come from the
standard AWS chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN,
AWS_PROFILE and ~/.aws/config, AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3); ledger never
prints, logs or records them (a message names the bucket and the endpoint's host only)."""

from __future__ import annotations

import os
from typing import Any, Iterator

from ledger.errors import LedgerError

SCHEME = "s3://"
# botocore's "standard" mode: exponential backoff with jitter on throttling (SlowDown, 503),
# 500s and dropped connections; bounded, so an endpoint that does not answer is an error
MAX_ATTEMPTS = 6
CONNECT_TIMEOUT = 5
READ_TIMEOUT = 60
POOL = 16  # connections (the push uploads this many objects at once)


def attempts() -> int:
    """AWS_MAX_ATTEMPTS (the AWS chain's own setting) when it is a number, else MAX_ATTEMPTS."""
    value = os.environ.get("AWS_MAX_ATTEMPTS", "")
    return int(value) if value.isdigit() and int(value) > 0 else MAX_ATTEMPTS


def is_bucket_url(target: Any) -> bool:
    """`s3://bucket/prefix` (a Path collapses it to `s3:/bucket/prefix`: taken as the same)."""
    return str(target).startswith("s3:/")


def parse_url(target: Any) -> tuple[str, str]:
    """(bucket, prefix without slashes at either end)."""
    text = str(target)
    rest = text[len("s3:/"):].lstrip("/")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not bucket or any(p in ("", ".", "..") for p in prefix.split("/") if prefix):
        raise LedgerError(f"{text!r} is not a bucket address",
                          hint="name the store as s3://BUCKET or s3://BUCKET/PREFIX")
    return bucket, prefix


class NotFound(Exception):
    """The object (or the bucket) is not there."""


class Exists(Exception):
    """A create-only write found the key taken (412 Precondition Failed)."""


class Bucket:
    """s3://bucket/prefix. Keys passed in are below the prefix."""

    def __init__(self, target: Any) -> None:
        self.bucket, self.prefix = parse_url(target)
        self.url = SCHEME + self.bucket + (f"/{self.prefix}" if self.prefix else "")
        self._client: Any = None
        self._endpoint = ""

    # -- the client (boto3 imported here only: never on a reader's path that has no bucket)
    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise LedgerError("a bucket store needs boto3, which is not installed",
                                  hint="pip install 'ledger[s3]'") from None
            endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
            style = "path" if endpoint else "auto"  # (MinIO, SeaweedFS, Ceph: path-style; AWS: its default)
            config = Config(retries={"max_attempts": attempts(), "mode": "standard"},
                            connect_timeout=CONNECT_TIMEOUT, read_timeout=READ_TIMEOUT,
                            max_pool_connections=POOL, s3={"addressing_style": style},
                            request_checksum_calculation="when_required",
                            response_checksum_validation="when_required")
            session = boto3.session.Session()
            region = session.region_name or "us-east-1"
            try:
                self._client = session.client("s3", region_name=region, config=config)
            except Exception as exc:  # noqa: BLE001 - a malformed endpoint, a broken profile
                raise LedgerError(f"cannot use the bucket {self.url}: {type(exc).__name__}",
                                  hint="check AWS_ENDPOINT_URL and AWS_PROFILE / ~/.aws/config") from None
            self._endpoint = _host(self._client.meta.endpoint_url)
        return self._client

    def key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    # -- calls
    def get(self, rel: str) -> bytes:
        try:
            res = self._call("get_object", Bucket=self.bucket, Key=self.key(rel))
            return res["Body"].read()
        except NotFound:
            raise
        except LedgerError:
            raise
        except Exception as exc:  # noqa: BLE001 - a connection cut while reading the body
            raise self._error(exc) from None

    def put_new(self, rel: str, data: bytes) -> bool:
        """Create `rel` unless it exists: True when written, False when it was there already
        (a create-only PUT refused with 412; a retried PUT whose first try landed says so too)."""
        try:
            self._call("put_object", Bucket=self.bucket, Key=self.key(rel), Body=data, IfNoneMatch="*")
        except Exists:
            return False
        return True

    def list(self, rel_prefix: str, after: str | None = None, delimiter: str | None = None) -> Iterator[str]:
        """Keys (below the prefix) starting with `rel_prefix`, in order, after `after`; with a
        delimiter, the common prefixes instead (one per "directory")."""
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": self.key(rel_prefix)}
        if after is not None:
            args["StartAfter"] = self.key(after)
        if delimiter:
            args["Delimiter"] = delimiter
        cut = len(self.key(""))
        while True:
            res = self._call("list_objects_v2", **args)
            if delimiter:
                for p in res.get("CommonPrefixes") or ():
                    yield p["Prefix"][cut:]
            else:
                for o in res.get("Contents") or ():
                    yield o["Key"][cut:]
            token = res.get("NextContinuationToken")
            if not res.get("IsTruncated") or not token:
                return
            args["ContinuationToken"] = token

    def _call(self, op: str, **args: Any) -> Any:
        client = self.client
        try:
            return getattr(client, op)(**args)
        except Exception as exc:  # noqa: BLE001 - sorted below; never a traceback
            code = _code(exc)
            if code in ("NoSuchKey", "404", "NotFound"):
                raise NotFound(args.get("Key", "")) from None
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                raise Exists(args.get("Key", "")) from None
            raise self._error(exc) from None

    def _error(self, exc: BaseException) -> LedgerError:
        code = _code(exc)
        name = type(exc).__name__
        where = f"the bucket {self.url}" + (f" at {self._endpoint}" if self._endpoint else "")
        if name in ("NoCredentialsError", "PartialCredentialsError"):
            return LedgerError(f"no credentials for {where}",
                               hint="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), and "
                                    "AWS_ENDPOINT_URL for a bucket that is not on AWS (see docs/team.md)")
        if code == "NoSuchBucket":
            return LedgerError(f"{where} does not exist",
                               hint=f"create the bucket {self.bucket} (or fix the name in --to / --home / LEDGER_STORE)")
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"):
            return LedgerError(f"{where} refused the credentials ({code})",
                               hint="check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the profile in AWS_PROFILE")
        if code in ("AccessDenied", "403", "Forbidden"):
            return LedgerError(f"{where} refused access (the key lacks a right this command needs)",
                               hint="a push needs list, get and put on PREFIX/; an index needs list and get "
                                    "(see docs/team.md, rights per role)")
        if name in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ReadTimeoutError",
                    "ProxyConnectionError", "SSLError", "ConnectionError"):
            return LedgerError(f"cannot reach {where} ({name}, after {attempts()} tries)",
                               hint="check AWS_ENDPOINT_URL and the network; what was pushed so far is kept and "
                                    "the next push resumes")
        return LedgerError(f"{where} failed: {code or name}" + (f" after {attempts()} tries" if code else ""),
                           hint="try again later: a push resumes where it stopped and never writes an object twice")


def _code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str((response.get("Error") or {}).get("Code") or "")
    return ""


def _host(url: str | None) -> str:
    """scheme://host[:port] of an endpoint (never a user name or password it might carry)."""
    from urllib.parse import urlsplit

    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
