"""The central record store (issue 11): `ledger push` brings a home's records to one place.

    DEST/ledger-store.json        {"schema_version": 1, "kind": "ledger-store"}
    DEST/homes/<home id>/         a ledger home: home-id.json, runs/<xx>/<run id>/..., sources/...
    DEST/index/                   where the store's own SQLite index goes when no --db is named

Each home is pushed into the directory named by its id (ledger.home, `home-id.json`), so two
machines with the same home path never meet, and `ledger index --home DEST/homes/<id>` (or
`--home DEST`: every home of the store) reads a pushed home exactly as it reads the original.

The store is append-only, and a push is idempotent:
- a file missing in the store is copied (temporary name, synced, then linked into place:
  a file is whole or absent, 0600 in 0700 directories);
- an append-only file that grew (a run's events.jsonl, an archived session log) is extended
  with the new bytes only, and only when the store's bytes are exactly the home's first bytes
  (compared byte for byte). Only complete lines (zstd archives: complete frames) are pushed:
  a torn last line is still being written and waits for the next push;
- any other difference (a manifest or receipt that changed, a file that shrank, a store copy
  that is not a prefix) is a conflict: listed, never overwritten, never merged;
- provider-session.json is the one record file the home itself replaces (while its run is
  unsettled); the store follows it until the store's copy of the run holds a terminal.json;
- a settled file being written (terminal.json that is not yet whole JSON) and the blobs of an
  unsettled run (written just before its receipt) wait for a later push.

Not pushed: the index (index.sqlite and its locks), the archive's own bookkeeping
(`sources/<client>/.state/`: the roots it imports from are this machine's paths, and an index
of the store must never import the indexing machine's logs into it), staging entries (`.`
names in runs/). The store home gets its own change marker (`.state/changed`) whenever a
client's archive grew, which is what tells an index pass to look again.

What a push verified is kept in the store's copy of the home (`.push-state.json`, written
after everything it vouches for is synced): a settled run whose files (lstat: size, mtime,
inode) are as they were is not read again, nor is an archived log with the same inode, size
and mtime; a log that grew is taken to continue the store's copy when its first 4 KiB and the
256 bytes before the end pushed hash as before (the archive's own rule for the clients'
logs). `ledger push --full` compares every file byte for byte again.

Symlinks in the home are never followed (they are listed as skipped); a DEST inside the home,
a DEST that is a ledger home, or a non-empty directory that is not a store is refused.
Durability is batched: the files of a batch are synced with one syncfs() before they are
linked into place, and once more at the end (an fsync per file would cost ~5 ms each).
"""
