"""The record store behind `ledger push --to` and `ledger index --home`: one interface, two
backends. A directory (ledger.store, a mounted share) or an S3-compatible bucket
(`s3://bucket/prefix`: ledger.bucket.push and ledger.bucket.mirror). A reader of either gets a
local directory store to index: the directory itself, or the bucket's mirror brought up to
date first."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ledger.bucket.client import Bucket, is_bucket_url
from ledger.store.summary import Progress, PushSummary


class DirectoryStore:
    def __init__(self, path: Any) -> None:
        self.path = path
        self.name = str(path)

    def push(self, home: Any, progress: Progress | None = None, full: bool = False) -> PushSummary:
        from ledger.store.push import push

        return push(home, self.path, progress=progress, full=full)

    def local(self) -> tuple[Path, Any]:
        """The directory to index, and what was read to bring it up to date (nothing here)."""
        return Path(os.path.abspath(self.path)), None


class BucketStore:
    def __init__(self, url: Any) -> None:
        self.url = Bucket(url).url  # (checks the address before anything is sent)
        self.name = self.url

    def push(self, home: Any, progress: Progress | None = None, full: bool = False) -> PushSummary:
        from ledger.bucket.push import push_bucket

        return push_bucket(home, self.url, progress=progress, full=full)

    def local(self) -> tuple[Path, Any]:
        from ledger.bucket.mirror import sync

        summary = sync(self.url)
        return Path(summary.mirror), summary


def store_at(target: Any) -> DirectoryStore | BucketStore:
    return BucketStore(target) if is_bucket_url(target) else DirectoryStore(target)
