"""Token rates per model, kept on disk, so that pricing does not import genai-prices.

Importing genai-prices costs more than the rest of a `ledger report` after one new run
(it loads pydantic, an HTTP client and the whole price table: ~0.7 G instructions, about
as much as `ledger --help` twice). Yet for a given price-data version and model, the
estimate ledger asks for is a fixed piecewise-linear function of the token counters:
genai-prices multiplies each priced unit's count by its price (a "cliff" tier picks the
price by total input) and adds a per-request price. So the first time a model is priced,
its rates are measured from genai-prices itself and written to a small JSON file; later
estimates are computed from them with the same Decimal arithmetic.

Exactness is checked, not assumed. Rates are measured per tier band (unit probes on top of
a base usage inside the band) and an entry is kept only when its model's prices in force do
not follow the time of day (prices that start on a date: the entry holds until the next one
starts) and the rates reproduce
genai-prices' own total, Decimal for Decimal, on random usages of every shape ledger sends
(plain, cache writes split by TTL, 5-minute or 1-hour only) in every band. Any other model
is priced by genai-prices every time, as before. A missing model is remembered as missing.

The file is `<cache dir>/price-rates.json` (`$LEDGER_CACHE_DIR`, else the platform's user
cache dir), keyed by the price data's identity (package version and its data file's size
and mtime): a new genai-prices starts a new table. A file that cannot be read or written
is ignored (the rates are then kept in memory for the process): it is only a cache.
"""

from __future__ import annotations

import os
import random
import time
from decimal import Decimal
from typing import Any, Callable, Mapping

import orjson

FILE_NAME = "price-rates.json"
FORMAT = 2  # (2: an entry names the tiers with rates of their own, ledger.pricing)
# the usage fields genai-prices is given (ledger.pricing._to_usage)
FIELDS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_5m_tokens",
          "cache_write_1h_tokens", "output_tokens")
# per band: the constant (per-request prices) and one rate per linear component
COMPONENTS = ("uncached", "cache_read", "cache_write", "cache_write_5m", "cache_write_1h", "output")
CHECKS = 6  # random usages per shape and band that must match genai-prices exactly

Usage = Mapping[str, int]
Calc = Callable[[Usage], Decimal]  # genai-prices' total for a usage (LookupError: no such model)


def cache_dir(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    if env.get("LEDGER_CACHE_DIR"):
        return os.path.expanduser(env["LEDGER_CACHE_DIR"])
    import platformdirs

    return platformdirs.user_cache_dir("ledger", appauthor=False)


def data_identity(version: str) -> str:
    """The price data's identity: the package version plus its data file's size and mtime (a
    reinstall or an edited table is a new identity), found without importing the package."""
    from importlib.util import find_spec

    try:
        spec = find_spec("genai_prices")
        origin = spec.origin if spec is not None else None
        st = os.stat(os.path.join(os.path.dirname(origin), "data.py")) if origin else None
    except (ImportError, OSError, ValueError):
        st = None
    return f"{version}|{st.st_size}|{st.st_mtime_ns}" if st is not None else f"{version}|?"


# -- the linear model -------------------------------------------------------------------

def components(u: Usage) -> tuple[int, ...]:
    """A genai-prices usage -> counts of COMPONENTS. Cache writes are priced either as one
    count or, when the usage carries the TTL split, per TTL (the other count is then 0)."""
    total = u.get("input_tokens", 0)
    read = u.get("cache_read_tokens", 0)
    write = u.get("cache_write_tokens", 0)
    split = "cache_write_5m_tokens" in u or "cache_write_1h_tokens" in u
    w5 = u.get("cache_write_5m_tokens", 0) if split else 0
    w1 = u.get("cache_write_1h_tokens", 0) if split else 0
    return (total - read - write, read, 0 if split else write, w5, w1, u.get("output_tokens", 0))


def band_of(starts: list[int], total_input: int) -> int:
    """Which tier band a usage falls in: how many tier starts its total input exceeds
    (genai-prices: a tier applies when total input tokens > its start)."""
    k = 0
    for s in starts:
        if total_input > s:
            k += 1
    return k


def apply(entry: Mapping[str, Any], u: Usage) -> Decimal:
    band = entry["bands"][band_of(entry["starts"], u.get("input_tokens", 0))]
    total = Decimal(band[0])
    for count, rate in zip(components(u), band[1:]):
        if count:
            total += Decimal(rate) * count
    return total


def _probe(n: int, comp: str) -> dict[str, int]:
    """A usage of `n` tokens of one component (as ledger.pricing._to_usage would shape it)."""
    if comp == "uncached":
        return {"input_tokens": n, "output_tokens": 0}
    if comp == "output":
        return {"input_tokens": 0, "output_tokens": n}
    if comp == "cache_read":
        return {"input_tokens": n, "output_tokens": 0, "cache_read_tokens": n}
    u = {"input_tokens": n, "output_tokens": 0, "cache_write_tokens": n}
    if comp == "cache_write_5m":
        u["cache_write_5m_tokens"] = n
    elif comp == "cache_write_1h":
        u["cache_write_1h_tokens"] = n
    return u


def _plus(a: Usage, b: Usage) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _random_usage(rnd: random.Random, shape: str, lo: int, hi: int) -> dict[str, int]:
    """A usage of one shape whose total input lies in [lo, hi]."""
    total = rnd.randint(lo, hi)
    read = rnd.randint(0, total // 2)
    write = rnd.randint(0, (total - read) // 2) if shape != "plain" or rnd.random() < 0.8 else 0
    u = {"input_tokens": total, "output_tokens": rnd.randint(0, 200_000)}
    if read:
        u["cache_read_tokens"] = read
    if write:
        u["cache_write_tokens"] = write
        if shape == "split":
            w5 = rnd.randint(1, write) if write > 1 else write
            if w5:
                u["cache_write_5m_tokens"] = w5
            if write - w5:
                u["cache_write_1h_tokens"] = write - w5
        elif shape == "5m":
            u["cache_write_5m_tokens"] = write
        elif shape == "1h":
            u["cache_write_1h_tokens"] = write
    return u


def measure(calc: Calc, starts: list[int], seed: int = 0) -> dict[str, Any] | None:
    """The entry of a model whose prices change at `starts` (tier thresholds of total input),
    or None when its prices are not reproduced exactly by per-band rates."""
    starts = sorted(set(s for s in starts if s >= 0))
    bands = []
    for k in range(len(starts) + 1):
        lo = 0 if k == 0 else starts[k - 1] + 1  # (the smallest total input in band k)
        hi = starts[k] if k < len(starts) else max(lo * 4, 10_000_000)
        if hi - lo < 2:
            return None  # (a band too narrow to probe)
        base = {"input_tokens": lo, "output_tokens": 0}
        at_base = calc(base)
        rates = []
        for comp in COMPONENTS:
            rates.append(calc(_plus(base, _probe(1, comp))) - at_base)
        const = at_base - rates[0] * lo
        bands.append([str(const), *(str(r) for r in rates)])
    entry = {"starts": starts, "bands": bands}
    rnd = random.Random(seed)
    for k in range(len(starts) + 1):
        lo = 0 if k == 0 else starts[k - 1] + 1
        hi = starts[k] if k < len(starts) else max(lo * 4, 10_000_000)
        for shape in ("plain", "split", "5m", "1h"):
            for _ in range(CHECKS):
                u = _random_usage(rnd, shape, lo, hi)
                if apply(entry, u) != calc(u):
                    return None
    return entry


# -- the on-disk table --------------------------------------------------------------------

class RateTable:
    """The entries of one price-data identity: key "provider\\x00model" -> entry, or
    {"missing": reason} for a model genai-prices does not know, or {"genai": true} for one
    whose prices are not per-band linear (priced by genai-prices every time)."""

    def __init__(self, identity: str, directory: str | None = None) -> None:
        self.identity = identity
        self.path = os.path.join(directory if directory is not None else cache_dir(), FILE_NAME)
        self.entries: dict[str, Any] = {}
        self._checked: dict[str, tuple[Any, bool]] = {}  # key -> (the entry, whether well formed)
        try:
            with open(self.path, "rb") as f:
                doc = orjson.loads(f.read())
            if (isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("identity") == identity
                    and isinstance(doc.get("entries"), dict)):
                self.entries = doc["entries"]
        except (OSError, ValueError):
            pass  # (none yet, unreadable or not ours: start empty)

    def get(self, provider: str | None, model: str) -> Any:
        """The entry, if well formed and still in force (`until`: the UTC date a newer price
        of the model starts; from then on the model is measured again)."""
        key = f"{provider or ''}\x00{model}"
        e = self.entries.get(key)
        seen = self._checked.get(key)
        if seen is None or seen[0] is not e:  # (checked once per entry: a report prices ~10^5 responses)
            seen = self._checked[key] = (e, _valid(e))
        if not seen[1]:
            return None
        until = e.get("until")
        if until is not None and time.strftime("%Y-%m-%d", time.gmtime()) >= until:
            return None
        return e

    def put(self, provider: str | None, model: str, entry: Any) -> None:
        self.entries[f"{provider or ''}\x00{model}"] = entry
        self._save()

    def _save(self) -> None:
        """Atomically: a temporary file in the same directory, renamed over the table (a
        reader sees the old table or the new one; two writers: the last one's entries)."""
        doc = {"format": FORMAT, "identity": self.identity, "entries": self.entries}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(orjson.dumps(doc))
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _valid(e: Any) -> bool:
    """An entry read from disk is used only when well formed (a damaged file is not trusted
    to price anything: the model is measured again)."""
    if not isinstance(e, dict) or not isinstance(e.get("until", ""), str):
        return False
    tiers = e.get("tiers", [])
    if not (isinstance(tiers, list) and all(isinstance(t, str) for t in tiers)):
        return False
    if "missing" in e:
        return isinstance(e["missing"], str)
    if e.get("genai") is True:
        return True
    starts, bands = e.get("starts"), e.get("bands")
    if not (isinstance(starts, list) and all(type(s) is int for s in starts) and isinstance(bands, list)
            and len(bands) == len(starts) + 1):
        return False
    for b in bands:
        if not (isinstance(b, list) and len(b) == len(COMPONENTS) + 1 and all(isinstance(x, str) for x in b)):
            return False
        try:
            if not all(Decimal(x).is_finite() for x in b):
                return False
        except ArithmeticError:
            return False
    return True
