"""The statistics of `ledger report compare`: pure functions over plain numbers.

No numpy: the standard library's `random.Random(seed)` drives the bootstraps, so the same
runs always give the same intervals (tests/test_compare_stats.py holds them to numpy/scipy
reference computations and to hand-computed values).

- `wilson(k, n)`: the Wilson score interval of a proportion k/n at 95% (z = 1.959963984540054).
- `median(values)`: the middle value, the mean of the two middle ones for an even count
  (statistics.median's rule, as the report's medians).
- `percentile(sorted_values, q)`: linear interpolation between the closest ranks (numpy's
  default `linear` method).
- `bootstrap_ci(values, stat)`: the percentile bootstrap, `RESAMPLES` resamples of the values
  drawn with replacement, the 2.5th and 97.5th percentiles of the statistic.
- `paired_bootstrap(pairs, stats)`: the same over paired units (tasks): each resample draws
  tasks, and every statistic is computed on the same draw, so arm A and arm B always see the
  same tasks.
- `pass_at_k(n, c, k)`: the chance that at least one of k trials drawn without replacement
  from n (c of them ok) is ok, 1 - C(n-c, k) / C(n, k) (the unbiased estimator of Chen et
  al. 2021); `pass_hat_k(n, c, k)`: that all k are, C(c, k) / C(n, k) (tau-bench's pass^k).
"""

from __future__ import annotations

import math
import random
from typing import Callable, Sequence

Z95 = 1.959963984540054  # the 97.5th percentile of the standard normal
RESAMPLES = 2000
SEED = 30  # fixed: the same runs give the same intervals
LOW_Q, HIGH_Q = 2.5, 97.5

Interval = tuple[float, float]


def wilson(k: int, n: int, z: float = Z95) -> Interval | None:
    """The Wilson score interval of k successes in n trials (None when n is 0)."""
    if n <= 0:
        return None
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of sorted values, linear between the closest ranks."""
    n = len(sorted_values)
    if n == 1:
        return sorted_values[0]
    pos = (n - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def _interval(estimates: list[float]) -> Interval | None:
    if not estimates:
        return None
    estimates.sort()
    return percentile(estimates, LOW_Q), percentile(estimates, HIGH_Q)


def bootstrap_ci(values: Sequence[float], stat: Callable[[Sequence[float]], float | None] = median, *,
                 resamples: int = RESAMPLES, seed: int = SEED) -> Interval | None:
    """The percentile bootstrap interval (95%) of stat(values); None without values. The
    median's is drawn by `_median_resamples` (the same distribution, without drawing n values
    per resample)."""
    values = list(values)
    if not values:
        return None
    rng = random.Random(seed)
    if stat is median:
        return _interval(_median_resamples(sorted(values), resamples, rng))
    n = len(values)
    out = []
    for _ in range(resamples):
        v = stat(rng.choices(values, k=n))
        if v is not None:
            out.append(v)
    return _interval(out)


def _median_resamples(s: Sequence[float], resamples: int, rng: random.Random) -> list[float]:
    """The medians of `resamples` bootstrap resamples of the sorted values `s`, drawn from
    their order statistics instead of n draws each (10,000 runs: 20 s -> milliseconds).

    A resample draws n indices floor(U_i * n) of uniforms U_i; sorting commutes with that map,
    so its k-th smallest index is floor(U_(k) * n), and the k-th order statistic of n uniforms
    is Beta(k, n - k + 1). For an even n the median also needs the next one: given U_(k) = u,
    U_(k+1) is u plus (1 - u) times the smallest of the n - k uniforms left, Beta(1, n - k)."""
    n = len(s)
    if n == 1:
        return [s[0]] * resamples
    k = (n + 1) // 2
    out = []
    for _ in range(resamples):
        u = rng.betavariate(k, n - k + 1)
        lo = s[min(n - 1, int(u * n))]
        if n % 2:
            out.append(lo)
        else:
            u2 = u + (1 - u) * rng.betavariate(1, n - k)
            out.append((lo + s[min(n - 1, int(u2 * n))]) / 2)
    return out


def paired_bootstrap(units: Sequence[object], stats: Sequence[Callable[[Sequence[object]], float | None]], *,
                     resamples: int = RESAMPLES, seed: int = SEED) -> list[Interval | None]:
    """Each statistic's percentile bootstrap interval (95%) over the same resamples of the
    units (e.g. tasks, each carrying both arms' figures). A resample where a statistic is
    undefined (a ratio over a zero) is skipped for that statistic."""
    units = list(units)
    if not units:
        return [None for _ in stats]
    rng = random.Random(seed)
    n = len(units)
    got: list[list[float]] = [[] for _ in stats]
    for _ in range(resamples):
        draw = rng.choices(units, k=n)
        for i, stat in enumerate(stats):
            v = stat(draw)
            if v is not None:
                got[i].append(v)
    return [_interval(g) for g in got]


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """At least one of k trials ok (of n trials, c ok); None when k > n or k < 1."""
    if k < 1 or k > n:
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """All k trials ok (of n trials, c ok); None when k > n or k < 1."""
    if k < 1 or k > n:
        return None
    return math.comb(c, k) / math.comb(n, k)
