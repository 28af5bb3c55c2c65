"""ledger.report.stats against hand-computed values and numpy/scipy reference computations
(numpy and scipy in the tests only: the module itself uses the standard library)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.stats import binomtest

from ledger.report import stats


@pytest.mark.parametrize("k,n", [(3, 6), (5, 6), (0, 5), (5, 5), (27, 40), (29, 40), (1, 1), (17, 1000)])
def test_wilson_equals_scipy(k, n):
    ref = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    lo, hi = stats.wilson(k, n)
    assert lo == pytest.approx(ref.low, abs=1e-12) and hi == pytest.approx(ref.high, abs=1e-12)


def test_wilson_by_hand():
    # 3 of 6: p = 0.5, z^2 = 3.841459; centre 0.5, half-width z*sqrt(0.25/6 + z^2/144)/(1 + z^2/6)
    assert stats.wilson(3, 6) == pytest.approx((0.1876163064826506, 0.8123836935173494), abs=1e-15)
    assert stats.wilson(0, 0) is None


def test_median_rule():
    assert stats.median([0.4, 0.1, 0.3, 0.2]) == pytest.approx(0.25)
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([]) is None


@pytest.mark.parametrize("q", [0, 2.5, 25, 50, 97.5, 100])
def test_percentile_is_numpys_linear(q):
    values = sorted(random.Random(1).uniform(0, 10) for _ in range(37))
    assert stats.percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-12)


def _numpy_bootstrap(values, resamples=40000, seed=7):
    rng = np.random.default_rng(seed)
    arr = np.asarray(values)
    draws = rng.choice(arr, size=(resamples, len(arr)), replace=True)
    meds = np.median(draws, axis=1)
    return np.percentile(meds, [2.5, 97.5])


def test_bootstrap_median_interval_matches_a_numpy_reference():
    rng = random.Random(3)
    values = [math.exp(rng.gauss(-3, 0.6)) for _ in range(60)]  # costs of 60 runs
    lo, hi = stats.bootstrap_ci(values)
    ref_lo, ref_hi = _numpy_bootstrap(values)
    width = ref_hi - ref_lo
    assert abs(lo - ref_lo) < 0.1 * width and abs(hi - ref_hi) < 0.1 * width
    assert lo <= stats.median(values) <= hi


def test_bootstrap_mean_interval_matches_scipy():
    from scipy.stats import bootstrap

    rng = random.Random(5)
    values = [rng.gauss(10, 2) for _ in range(50)]
    ref = bootstrap((np.asarray(values),), np.mean, n_resamples=20000, method="percentile",
                    random_state=np.random.default_rng(1)).confidence_interval
    lo, hi = stats.bootstrap_ci(values, stats.mean)
    width = ref.high - ref.low
    assert abs(lo - ref.low) < 0.05 * width and abs(hi - ref.high) < 0.05 * width


def test_bootstrap_is_stable_and_seeded():
    values = [0.1, 0.5, 0.2, 0.9, 0.3, 0.3, 0.7]
    assert stats.bootstrap_ci(values) == stats.bootstrap_ci(values)
    noisy = [random.Random(i).random() for i in range(40)]
    assert stats.bootstrap_ci(noisy, stats.mean, seed=1) != stats.bootstrap_ci(noisy, stats.mean, seed=2)
    assert stats.bootstrap_ci([]) is None
    assert stats.bootstrap_ci([0.25]) == (0.25, 0.25)


def test_paired_bootstrap_matches_a_numpy_reference():
    rng = random.Random(11)
    tasks = []
    for _ in range(30):
        base = math.exp(rng.gauss(-2, 0.5))
        tasks.append(((rng.random() < 0.6) * 1.0, base, (rng.random() < 0.7) * 1.0, base * rng.uniform(0.5, 0.9)))

    def diff(us):
        return sum(u[2] - u[0] for u in us) / len(us)

    def ratio(us):
        return stats.median([u[3] for u in us]) / stats.median([u[1] for u in us])

    (dlo, dhi), (rlo, rhi) = stats.paired_bootstrap(tasks, [diff, ratio])
    arr = np.asarray(tasks)
    g = np.random.default_rng(2)
    idx = g.integers(0, len(tasks), size=(40000, len(tasks)))
    draws = arr[idx]
    d = (draws[:, :, 2] - draws[:, :, 0]).mean(axis=1)
    r = np.median(draws[:, :, 3], axis=1) / np.median(draws[:, :, 1], axis=1)
    ref_d, ref_r = np.percentile(d, [2.5, 97.5]), np.percentile(r, [2.5, 97.5])
    assert abs(dlo - ref_d[0]) < 0.1 * (ref_d[1] - ref_d[0]) and abs(dhi - ref_d[1]) < 0.1 * (ref_d[1] - ref_d[0])
    assert abs(rlo - ref_r[0]) < 0.1 * (ref_r[1] - ref_r[0]) and abs(rhi - ref_r[1]) < 0.1 * (ref_r[1] - ref_r[0])


def test_paired_bootstrap_draws_the_same_tasks_for_every_statistic():
    # a statistic that is 0 only when both see the same draw: B - A over identical figures
    units = [(x, x) for x in (0.1, 0.4, 0.9, 1.6)]
    (lo, hi), = stats.paired_bootstrap(units, [lambda us: sum(b - a for a, b in us)])
    assert (lo, hi) == (0.0, 0.0)


def test_pass_at_k_and_pass_hat_k():
    # n = 5 trials, c = 2 ok, k = 2: pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10; pass^2 = C(2,2)/C(5,2) = 1/10
    assert stats.pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert stats.pass_hat_k(5, 2, 2) == pytest.approx(0.1)
    assert stats.pass_at_k(2, 1, 2) == 1.0 and stats.pass_hat_k(2, 1, 2) == 0.0
    assert stats.pass_at_k(3, 0, 1) == 0.0 and stats.pass_hat_k(3, 3, 3) == 1.0
    assert stats.pass_at_k(2, 1, 3) is None and stats.pass_hat_k(2, 1, 0) is None


@pytest.mark.parametrize("n", [2, 6, 7, 60, 61])
def test_median_resamples_have_the_plain_bootstraps_distribution(n):
    """The order-statistic draw of the median equals resampling n values each time (numpy),
    in distribution: the two empirical CDFs differ by less than 0.02 everywhere."""
    rng = random.Random(n)
    values = sorted(round(rng.uniform(0, 1), 2) for _ in range(n))  # (ties included)
    ours = np.sort(stats._median_resamples(values, 20000, random.Random(1)))
    g = np.random.default_rng(3)
    ref = np.sort(np.median(g.choice(np.asarray(values), size=(20000, n), replace=True), axis=1))
    grid = np.unique(np.concatenate([ours, ref]))
    cdf = lambda a: np.searchsorted(a, grid, side="right") / len(a)  # noqa: E731
    assert np.max(np.abs(cdf(ours) - cdf(ref))) < 0.02


def test_median_interval_of_many_runs_is_fast():
    import time

    values = [random.Random(i).random() for i in range(100_000)]
    t0 = time.perf_counter()
    lo, hi = stats.bootstrap_ci(values)
    assert time.perf_counter() - t0 < 2.0 and lo < stats.median(values) < hi
