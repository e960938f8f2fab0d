"""Is a change in step time more than noise? The test behind ``gpuscope
compare`` when both runs kept their window's step times (docs/baselines.md).

For the chosen statistic (p50, p95, mean step time, or throughput) it gives
the relative change new vs base and a 95 % bootstrap confidence interval of
that change, from resampling each run's own steps. A regression is called
only when the whole interval lies past the bound: a change that the runs'
own step-to-step noise could explain is reported as such, never as a
regression.

The method, and why:

- **Circular block bootstrap** (Politis & Romano 1992), each run resampled
  on its own. Step times are not independent: on a shared machine a
  neighbour's burst, a slow storage stretch or throttling slows many steps
  in a row. Resampling single steps would treat a 20-step burst as 20
  independent draws and give an interval far too narrow, so noise would
  read as a regression. Resampling contiguous blocks keeps the bursts whole;
  circular blocks (wrapping from the last step to the first) give every step
  the same chance to be drawn.
- **Block length** ``max(round(n ** (1/3)), L)``, at most ``n // 4``:
  ``n ** (1/3)`` is the asymptotically optimal order for the block bootstrap
  of short-memory series (Hall, Horowitz & Jing 1995); ``L``, the first lag
  at which the autocorrelation of the step times' ranks falls inside the
  white-noise band ``2 / sqrt(n)``, stretches the blocks over longer bursts.
  Ranks, so that a few huge outliers (a checkpoint, a page-cache miss) do
  not decide the correlation. A run that drifts throughout gets the longest
  blocks, hence a wide interval: its steps do not say what its level is.
- **Percentile interval** of the ratio ``stat(new) / stat(base) - 1`` over
  2000 resample pairs: no assumption on the shape of the step-time
  distribution (step times are skewed, with heavy right tails), and a ratio
  because the bound is relative.
- **Reproducible**: the block starts come from ``random.Random(0)``'s
  32-bit words (``getrandbits``, whose output for a seed CPython has kept
  unchanged for many releases), and the resampling runs in C++
  (lib/core/bootstrap.h) on those words, so the same two files give the
  same interval on every machine, with or without numpy.

What it cannot see: a difference between the two runs' *conditions* (the
whole new run on a busier machine) is a real difference in step time, and
reads as a change. The bound (``--max-regression``) is the allowance for it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import List, Sequence

from ._gpuscope import _bootstrap_block_length, _bootstrap_resamples

STATISTICS = ("p50", "p95", "mean", "throughput")
# The median: the step time of a typical step, which the slow steps a
# shared machine adds (a neighbour's burst, a page-cache miss) barely move,
# so its interval is narrow and a real change in the code shows early.
# p95 and mean follow the tail: a regression that only slows some steps (a
# periodic stall) needs them, at the cost of wider intervals.
DEFAULT_STATISTIC = "p50"
DEFAULT_MIN_STEPS = 30
RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0


def quantile_of_sorted(xs: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (Hyndman-Fan type 7,
    numpy's default), as the summary's p50/p95 are defined."""
    n = len(xs)
    if n == 0:
        return 0.0
    h = (n - 1) * q
    lo = int(math.floor(h))
    if lo + 1 >= n:
        return float(xs[n - 1])
    return _interpolate(float(xs[lo]), float(xs[lo + 1]), h - lo)


def _interpolate(a: float, b: float, frac: float) -> float:
    return a if a == b else a + frac * (b - a)  # a == b: also inf (a resample of 0 s steps)


def block_length(xs: Sequence[float]) -> int:
    """The bootstrap block length for one run's step times (module
    docstring)."""
    return _bootstrap_block_length([float(x) for x in xs])


class _Resampler:
    """One run's circular block resamples: ``resamples`` draws of block
    starts from the shared generator, and the statistic over each (the
    resampling runs in C++, lib/core/bootstrap.h)."""

    def __init__(self, xs: Sequence[float], rng: random.Random, resamples: int) -> None:
        self.xs = [float(x) for x in xs]
        n = len(self.xs)
        self.b = _bootstrap_block_length(self.xs)
        k = -(-n // self.b)  # blocks per resample, the last one cut
        # 32-bit words of the generator in order (getrandbits draws the
        # Mersenne Twister's words in order): one call, not one per start.
        count = resamples * k
        self.words = rng.getrandbits(32 * count).to_bytes(4 * count, "little")

    def means(self) -> List[float]:
        return _bootstrap_resamples(self.xs, self.b, self.words, -1.0)

    def quantiles(self, q: float) -> List[float]:
        return _bootstrap_resamples(self.xs, self.b, self.words, q)


def _point(xs: Sequence[float], statistic: str) -> float:
    if statistic in ("mean", "throughput"):
        return math.fsum(xs) / len(xs)
    return quantile_of_sorted(sorted(xs), 0.5 if statistic == "p50" else 0.95)


@dataclass(frozen=True)
class StepTimeChange:
    """The result of ``compare_step_times()``. ``base`` and ``new`` are the
    statistic on each run's steps (seconds, or per second for throughput,
    ``unit`` says which); ``change_pct`` and the interval ``ci_low_pct`` ..
    ``ci_high_pct`` are relative (new vs base, %); ``verdict`` is one of
    ``"regression"``, ``"within noise"``, ``"slower, within the bound"``,
    ``"slower, not shown past the bound"`` and ``"faster"``."""

    statistic: str
    unit: str
    base: float
    new: float
    change_pct: float
    ci_low_pct: float
    ci_high_pct: float
    confidence: float
    base_steps: int
    new_steps: int
    base_block: int
    new_block: int
    bound_pct: float
    verdict: str

    @property
    def regression(self) -> bool:
        return self.verdict == "regression"

    @property
    def name(self) -> str:
        return f"throughput ({self.unit})" if self.statistic == "throughput" else f"{self.statistic} step time"

    def describe(self) -> str:
        """``p50 step time +3.1% (95% CI -1.2% to +7.4%, 512 vs 512 steps)``."""
        return (f"{self.name} {self.change_pct:+.1f}% ({self.confidence * 100:g}% CI "
                f"{self.ci_low_pct:+.1f}% to {self.ci_high_pct:+.1f}%, {self.base_steps} vs "
                f"{self.new_steps} steps)")

    def line(self) -> str:
        verdict = ("regression, past the bound" if self.regression else self.verdict)
        return f"{self.describe()}: {verdict.replace('the bound', f'the {self.bound_pct:g}% bound')}"


def compare_step_times(base: Sequence[float], new: Sequence[float], statistic: str = DEFAULT_STATISTIC,
                       max_regression_pct: float = 5.0, *, base_scale: float = 1.0, new_scale: float = 1.0,
                       unit: str = "steps/s", resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                       seed: int = SEED) -> StepTimeChange:
    """The change of ``statistic`` from ``base`` to ``new`` step times
    (seconds, in step order) with its bootstrap interval (module docstring).
    For ``"throughput"``, each run's throughput is ``scale / mean step
    time`` (``scale``: samples or tokens per step; 1 for steps/s). Raises
    ValueError for an unknown statistic, fewer than 2 steps, or a
    statistic of 0 (a relative change of nothing)."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, not {statistic!r}")
    if len(base) < 2 or len(new) < 2:
        raise ValueError("a run needs at least 2 steps to tell a change from noise")
    if not (0 < confidence < 1) or resamples < 1:
        raise ValueError("confidence must lie in (0, 1) and resamples be 1 or more")
    throughput = statistic == "throughput"
    b0, n0 = _point(base, statistic), _point(new, statistic)
    # The change is relative to the baseline's statistic; throughput also
    # divides by the new run's mean.
    for run, value in (("baseline", b0), ("new run", n0)) if throughput else (("baseline", b0),):
        if not value > 0:
            raise ValueError(f"the {run}'s {'mean' if throughput else statistic} step time is 0 s, so no "
                             "relative change can be taken from it (recorded on a clock that did not move?); "
                             "record the run again")
    rng = random.Random(seed)
    rb = _Resampler(base, rng, resamples)
    rn = _Resampler(new, rng, resamples)
    if throughput or statistic == "mean":
        bs, ns = rb.means(), rn.means()
    else:
        q = 0.5 if statistic == "p50" else 0.95
        bs, ns = rb.quantiles(q), rn.quantiles(q)

    def change(b: float, n: float) -> float:
        if throughput:  # (new_scale / n) / (base_scale / b) - 1
            b, n = n * base_scale, b * new_scale
        if b > 0:
            return n / b - 1.0
        return 0.0 if n == 0 else math.inf

    point = change(b0, n0)
    changes = sorted(change(b, n) for b, n in zip(bs, ns))
    alpha = (1.0 - confidence) / 2.0
    low, high = quantile_of_sorted(changes, alpha), quantile_of_sorted(changes, 1.0 - alpha)
    # "Worse" is slower: more step time, or less throughput.
    worse_low, worse_high = (-high, -low) if throughput else (low, high)
    bound = max_regression_pct / 100.0
    if worse_low > bound:
        verdict = "regression"
    elif worse_high < 0:
        verdict = "faster"
    elif worse_low <= 0:
        verdict = "within noise"
    elif worse_high <= bound:
        verdict = "slower, within the bound"
    else:
        verdict = "slower, not shown past the bound"
    if throughput:
        b0, n0 = base_scale / b0, new_scale / n0
    return StepTimeChange(statistic=statistic, unit=unit if throughput else "s", base=b0, new=n0,
                          change_pct=100.0 * point, ci_low_pct=100.0 * low, ci_high_pct=100.0 * high,
                          confidence=confidence, base_steps=len(base), new_steps=len(new),
                          base_block=rb.b, new_block=rn.b, bound_pct=max_regression_pct, verdict=verdict)


__all__ = ["STATISTICS", "DEFAULT_STATISTIC", "DEFAULT_MIN_STEPS", "StepTimeChange", "compare_step_times",
           "block_length", "quantile_of_sorted"]
