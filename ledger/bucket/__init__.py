"""The team's record store in an S3-compatible bucket (issue 31).

    PREFIX/ledger-store.json                   the store's marker (written once)
    PREFIX/homes/<home id>/pushed-from.json    where the home is pushed from (written once)
    PREFIX/homes/<home id>/objects/<xx>/<sha>  evidence: immutable, named by the sha256 of its bytes
    PREFIX/homes/<home id>/log/<seq>.json      the home's push log: 1, 2, 3, ... written by that home only

An object holds the pieces one push took from one run (a settled run: all its files; an
unsettled one: what it has so far, later the new bytes of its events), or the new frames of
one archived log. Objects are never rewritten: a lost race, or a push that resumes after it
was killed, writes the same bytes under the same name. A log entry names the objects and which
byte ranges of which files they hold; it is written after its objects, so a reader that sees
an entry finds its objects. A central reader (ledger.bucket.mirror) lists only the log entries
after its cursor and gets only the objects they name, into a local directory store that the
ordinary index reads.

Nothing here imports boto3 at module level: it is imported by ledger.bucket.client only.
"""
