"""A hazard-free Claude Code history (for comparing with ccusage, which counts it right).

One line per API response, each with its own `message.id` and `requestId` and the 2.0.x
`costUSD` (the line shape of tests/claudehistory.py's 2.0 style, itself from captures): no
content-block repeats, streaming snapshots, resumes, forks, compactions or subagents.
`write(root, spans)` writes one session per span: (start, [minutes after start of each
response]), model per response cycling through MODELS, counters from a seeded generator.
"""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Sequence

import orjson

MODELS = ("claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001")
UNIT = 2.0 ** -20


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def write(root: Path, spans: Sequence[tuple[datetime, Sequence[float]]], seed: int = 0) -> int:
    """Write the sessions under root/projects/...; returns the number of responses."""
    rng = random.Random(seed)
    n = 0
    for k, (start, minutes) in enumerate(spans):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        d = root / "projects" / f"-work-proj{k % 2}"
        d.mkdir(parents=True, exist_ok=True)
        lines = []
        for i, m in enumerate(minutes):
            t = start + timedelta(minutes=m)
            lines.append({"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": f"/work/proj{k % 2}",
                          "sessionId": sid, "version": "2.0.76", "type": "user",
                          "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "timestamp": _iso(t),
                          "message": {"role": "user", "content": "go on"}})
            usage = {"input_tokens": rng.randint(1, 50), "cache_creation_input_tokens": rng.choice([0, rng.randint(10, 3000)]),
                     "cache_read_input_tokens": rng.choice([0, rng.randint(100, 9000)]),
                     "output_tokens": rng.randint(1, 3000), "service_tier": "standard"}
            mid = "msg_01" + "".join(rng.choice("0123456789abcdef") for _ in range(22))
            lines.append({"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": f"/work/proj{k % 2}",
                          "sessionId": sid, "version": "2.0.76", "gitBranch": "main", "type": "assistant",
                          "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                          "timestamp": _iso(t + timedelta(seconds=2)),
                          "message": {"id": mid, "type": "message", "role": "assistant", "model": MODELS[i % len(MODELS)],
                                      "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "usage": usage},
                          "requestId": "req_011" + "".join(rng.choice("0123456789abcdef") for _ in range(21)),
                          "costUSD": rng.randint(1, 4000) * UNIT})
            n += 1
        (d / f"{sid}.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return n
