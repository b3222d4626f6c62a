"""Lengths in tokens: a fixed number or a distribution, read from the workload, drawn by seed, summed up.

Why this module exists: synthetic prompts take their input length and their max_tokens either as
an integer or as `{ dist, mean, stddev, min, max }`; the reading of that table (every error
recorded), the draws (the same lengths for the same seed, pass after pass) and the summary
`validate` prints (count, mean, p50/p99, min/max) belong together.
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Iterable, Iterator
from typing import cast

from oxconsole.workload import bounds as b
from oxconsole.workload.prompts.promptdata import LengthStats
from oxconsole.workload.schema import Dist, LengthDist, toml_keys
from oxconsole.workload.values import Table, is_int, is_num

_DIST_KEYS = toml_keys(LengthDist)
_DISTS = ("normal", "lognormal", "uniform")
SAMPLE_MAX = 1_000_000
"""Lengths kept for percentiles (4-8 bytes each): beyond that, the first ones stand for the rest."""


def parse_length(t: Table, key: str, default: int) -> int | LengthDist:
    """`key` of table `t`: an integer 1..MAX_TOKENS, or a distribution table (every error recorded)."""
    if key not in t.data:
        return default
    v = t.data[key]
    if not isinstance(v, dict):
        if is_int(v):
            return t.int_(key, default, 1, b.MAX_TOKENS, " (tokens)")
        t.fail(key, 'an integer >= 1 or a distribution { dist = "normal", mean = ..., stddev = ... }')
        return default
    d = Table(t.errs, v, t.p(key), _DIST_KEYS, "a length distribution")
    dist = cast(Dist, d.enum("dist", "normal", _DISTS))
    if "dist" not in d.data:
        d.required("dist", '"normal" | "lognormal" | "uniform"')
    lo = d.int_("min", 1, 1, b.MAX_TOKENS, " (tokens)")
    hi = d.int_("max", b.MAX_TOKENS, 1, b.MAX_TOKENS, " (tokens)")
    if lo > hi and d.ok("min", "max"):
        d.fail("max", f"an integer >= min ({lo})")
    if dist == "uniform":
        for k in ("mean", "stddev"):
            if k in d.data:
                d.fail(k, 'nothing: a "uniform" distribution takes min and max only')
        for k in ("min", "max"):
            if k not in d.data:
                d.required(k, 'an integer >= 1 (a "uniform" distribution needs min and max)')
        return LengthDist(dist, (lo + hi) / 2, (hi - lo) / math.sqrt(12), lo, hi)
    mean = _positive(d, "mean", required=True)
    stddev = _positive(d, "stddev", required=True, zero=True)
    if mean and not lo <= mean <= hi and d.ok("mean", "min", "max"):
        d.fail("mean", f"a number between min ({lo}) and max ({hi})")
    return LengthDist(dist, mean or 1.0, stddev, lo, hi)


def _positive(d: Table, key: str, *, required: bool, zero: bool = False) -> float:
    if key not in d.data:
        if required:
            d.required(key, f"a number {'>= 0' if zero else '> 0'} (tokens)")
        return 0.0
    v = d.data[key]
    if not is_num(v) or v < 0 or (v == 0 and not zero) or v > b.MAX_TOKENS:
        d.fail(key, f"a number {'>= 0' if zero else '> 0'} and at most {b.fmt_limit(b.MAX_TOKENS)} (tokens)")
        return 0.0
    return float(v)


def draws(spec: int | LengthDist, seed: int, which: str) -> Iterator[int]:
    """The lengths of one pass, prompt after prompt: the same sequence for the same seed and `which`."""
    if isinstance(spec, int):
        while True:
            yield spec
    rng = random.Random(f"oxconsole-lengths:{seed}:{which}")
    lo, hi = spec.min, spec.max
    if spec.dist == "uniform":
        randint = rng.randint
        while True:
            yield randint(lo, hi)
    if spec.dist == "normal":
        gauss, mean, sd = rng.gauss, spec.mean, spec.stddev
        while True:
            yield min(hi, max(lo, round(gauss(mean, sd))))
    # lognormal with the lengths' own mean and stddev: the underlying normal's mu and sigma
    sigma = math.sqrt(math.log1p((spec.stddev / spec.mean) ** 2))
    mu = math.log(spec.mean) - sigma * sigma / 2
    lognorm = rng.lognormvariate
    while True:
        yield min(hi, max(lo, round(lognorm(mu, sigma))))


def describe_length(spec: int | LengthDist) -> str:
    """A length as the workload gave it, in words: `256` or `normal(mean 256, stddev 64, 1..1000)`."""
    if isinstance(spec, int):
        return str(spec)
    if spec.dist == "uniform":
        return f"uniform({spec.min}..{spec.max})"
    return f"{spec.dist}(mean {spec.mean:g}, stddev {spec.stddev:g}, {spec.min}..{spec.max})"


def length_stats(values: Iterable[int]) -> LengthStats | None:
    """Count, mean, min and max of all the lengths; p50/p99 of the first SAMPLE_MAX. None if empty."""
    kept = array("q")
    n = 0
    total = 0
    lo = hi = 0
    for v in values:
        if n == 0:
            lo = hi = v
        elif v < lo:
            lo = v
        elif v > hi:
            hi = v
        n += 1
        total += v
        if n <= SAMPLE_MAX:
            kept.append(v)
    if n == 0:
        return None
    ordered = sorted(kept)

    def pct(q: float) -> int:
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    return LengthStats(n, total / n, pct(0.5), pct(0.99), lo, hi, len(ordered))


def fmt_stats(s: LengthStats) -> str:
    """`mean 251.3, p50 250, p99 402, min 31, max 498` (with the sample size when not all were kept)."""
    text = f"mean {s.mean:.1f}, p50 {s.p50}, p99 {s.p99}, min {s.min}, max {s.max}"
    if s.sampled < s.count:
        text += f" (percentiles over the first {s.sampled:_})"
    return text
