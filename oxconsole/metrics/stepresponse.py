"""Step response: what a burst did to TTFT, and how long the endpoint took to get over it.

Why this module exists: a burst (a stage, a key, a command or auto concurrency that at least
doubles concurrency or rate) is where cold starts and queues show, and a chart read by eye says
neither how large the penalty was nor how long it lasted. Each such change is a step; its figures
(docs/bursts.md, "What the step figures mean"):

* `ttft_before_ms`: the p50 TTFT of the requests *sent* in the 10 s before the step (not before
  the previous change of concurrency or rate);
* `ttft_after_ms`: the p50 of those sent in the first 10 s after it (not after the next change);
* `penalty_ms`: after less before;
* `recovery_s`: from the step until the rolling p50 of 20 requests (in the order they were sent)
  is within 10% of the p50 of the step's last 10 s, its settled state (the last 10 s before the
  next change of concurrency or rate, or before the run's end), counted past its worst moment: a
  queue that has not built up yet in the first instants is not a recovery. 0 when even the worst
  is within; None when it never is after it.

Requests are placed by the time they were sent, and their TTFT is known only when they end, so a
step keeps the TTFT of every ok request sent in its span (at most `MAX_SAMPLES`, 16 bytes each)
until the summary; before any step only the last 10 s of sends are held.
"""

from __future__ import annotations

import bisect
from array import array
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Final

from oxconsole.base.figures import TTFT

__all__ = [
    "MAX_SAMPLES",
    "StepTracker",
    "is_step",
    "no_penalty",
    "step_figures",
    "step_notes",
    "step_sentence",
]

WINDOW_S: Final = 10.0
"""The before, after and settled windows, in seconds."""
ROLLING: Final = 20
"""Requests in the rolling p50 that decides the recovery."""
WITHIN: Final = 0.10
"""How close to the settled p50 counts as recovered (a share of it)."""
MAX_SAMPLES: Final = 200_000
"""Requests a step keeps (16 bytes each): beyond them its span ends early."""
_SETTINGS: Final = frozenset({"concurrency", "rate"})


def is_step(c: Mapping[str, Any]) -> bool:
    """A change that at least doubles concurrency or rate. A rate made unlimited (0) is not one:
    no rate doubled, and what it offers then is bounded by the concurrency (a closed loop at 20
    in flight offers what it offered at 9.99/s if its requests take two seconds); a change that
    does double the load is a step by its concurrency or its rate."""
    if c.get("what") not in _SETTINGS:
        return False
    frm, to = c.get("from"), c.get("to")
    if not isinstance(frm, int | float) or not isinstance(to, int | float) or frm <= 0 or to <= 0:
        return False
    return bool(to >= 2 * frm)


def _p50(values: Sequence[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def _recovery(ts: Sequence[float], vs: Sequence[float], t0: float, target: float | None) -> float | None:
    """Seconds from `t0` until the rolling p50 of `ROLLING` values, past its worst, is within
    `WITHIN` of `target`: 0 when even the worst is within, None when it never is after it."""
    if target is None or len(vs) < ROLLING:
        return None
    window = sorted(vs[:ROLLING])
    mid = ROLLING // 2
    rolling = array("d")
    for i in range(ROLLING - 1, len(vs)):
        if i >= ROLLING:
            del window[bisect.bisect_left(window, vs[i - ROLLING])]
            bisect.insort(window, vs[i])
        rolling.append((window[mid - 1] + window[mid]) / 2.0)
    tol = WITHIN * target
    worst = max(range(len(rolling)), key=lambda k: abs(rolling[k] - target))
    if abs(rolling[worst] - target) <= tol:
        return 0.0
    for k in range(worst, len(rolling)):
        if abs(rolling[k] - target) <= tol:
            return round(ts[k + ROLLING - 1] - t0, 3)
    return None


def step_figures(
    ts: Sequence[float], vs: Sequence[float], t0: float, lo: float, end: float
) -> dict[str, Any]:
    """The figures of a step at `t0` from requests sent at `ts` (sorted) with TTFT `vs`, over
    [lo, end): `lo` where its before window starts, `end` where its span ends."""
    i0 = bisect.bisect_left(ts, max(lo, t0 - WINDOW_S))
    i1 = bisect.bisect_left(ts, t0)
    i2 = bisect.bisect_left(ts, min(t0 + WINDOW_S, end))
    i3 = bisect.bisect_left(ts, end)
    i_tail = bisect.bisect_left(ts, max(t0, end - WINDOW_S))
    before = _p50(vs[i0:i1])
    after = _p50(vs[i1:i2])
    target = _p50(vs[i_tail:i3])
    return {
        "ttft_before_ms": None if before is None else round(before, 1),
        "ttft_after_ms": None if after is None else round(after, 1),
        "penalty_ms": None if before is None or after is None else round(after - before, 1),
        "recovery_s": _recovery(ts[i1:i3], vs[i1:i3], t0, target),
    }


class _Step:
    __slots__ = ("change", "hi", "lo", "models", "t", "ts", "vs", "wall")

    def __init__(self, change: Mapping[str, Any], wall: float, lo: float) -> None:
        self.change = dict(change)
        self.t = float(change["t"])
        self.wall = wall
        """The step's wall time; samples are placed by theirs (`t_sent`)."""
        self.lo = lo
        self.hi = float("inf")
        """Where its span ends: the next change of concurrency or rate."""
        self.ts = array("d")
        self.vs = array("d")
        self.models: list[str] = []

    def add(self, t: float, v: float, model: str) -> None:
        if len(self.ts) < MAX_SAMPLES:
            self.ts.append(t)
            self.vs.append(v)
            self.models.append(model)
        elif t > self.wall:
            self.hi = min(self.hi, self.ts[-1])  # full: the span ends with what it holds

    def figures(self, end: float) -> dict[str, Any]:
        order = sorted(range(len(self.ts)), key=self.ts.__getitem__)
        ts = [self.ts[i] for i in order]
        vs = [self.vs[i] for i in order]
        span_end = min(self.hi, end)
        out: dict[str, Any] = {
            k: self.change[k] for k in ("t", "what", "from", "to", "model", "by") if k in self.change
        }
        out.update(step_figures(ts, vs, self.wall, self.lo, span_end))
        names = sorted(set(self.models))
        if len(names) > 1:
            out["models"] = {}
            for name in names:
                keep = [j for j, i in enumerate(order) if self.models[i] == name]
                mts = [ts[j] for j in keep]
                mvs = [vs[j] for j in keep]
                out["models"][name] = step_figures(mts, mvs, self.wall, self.lo, span_end)
        return out


class StepTracker:
    """The steps of one run: fed every finished request and every change, on the engine's loop."""

    def __init__(self) -> None:
        self._recent: deque[tuple[float, float, str]] = deque()
        """(t_sent, ttft_ms, model) of the ok requests sent in the last `WINDOW_S` (by t_sent)."""
        self._newest = 0.0
        self._steps: list[_Step] = []
        self._boundary = -float("inf")
        """Wall time of the last change of concurrency or rate."""
        self._live: tuple[int, float, dict[str, Any] | None] = (-1, -1.0, None)

    @property
    def count(self) -> int:
        return len(self._steps)

    def sample(self, t_sent: float, ttft_ms: float | None, model: str) -> None:
        """An ok request sent at `t_sent` (wall time) with this TTFT. O(1) without steps."""
        if ttft_ms is None:
            return
        if t_sent > self._newest:
            self._newest = t_sent
        recent = self._recent
        recent.append((t_sent, ttft_ms, model))
        cut = self._newest - WINDOW_S
        while recent[0][0] < cut:
            recent.popleft()
        for st in reversed(self._steps):
            if st.lo <= t_sent < st.hi:
                st.add(t_sent, ttft_ms, model)
            elif t_sent >= st.hi:
                break

    def change(self, c: Mapping[str, Any], wall: float) -> None:
        """A logged change (the collector's `changes` entry) made at `wall` (wall time)."""
        if c.get("what") not in _SETTINGS:
            return
        if self._steps and self._steps[-1].hi == float("inf"):
            self._steps[-1].hi = wall
        if is_step(c):
            st = _Step(c, wall, max(self._boundary, wall - WINDOW_S))
            for t, v, m in self._recent:
                if st.lo <= t:
                    st.add(t, v, m)
            self._steps.append(st)
        self._boundary = wall

    def steps(self, end_wall: float) -> list[dict[str, Any]]:
        """Every step's figures, the run having ended at `end_wall`."""
        return [st.figures(end_wall) for st in self._steps]

    def last(self, now_wall: float) -> dict[str, Any] | None:
        """The last step's figures so far (its settled state: the last 10 s until now), computed
        again at most once a second."""
        if not self._steps:
            return None
        n, at, figs = self._live
        if n == len(self._steps) and now_wall - at < 1.0:
            return figs
        figs = self._steps[-1].figures(now_wall)
        self._live = (len(self._steps), now_wall, figs)
        return figs


def _secs(ms: float) -> str:
    return f"{ms / 1000.0:.1f} s" if abs(ms) >= 1000.0 else f"{ms:.0f} ms"


def no_penalty(st: Mapping[str, Any]) -> bool:
    """The step cost nothing to tell apart from noise: at most 10 ms, or 10% of the TTFT before."""
    pen, before = st.get("penalty_ms"), st.get("ttft_before_ms")
    if not isinstance(pen, int | float):
        return False
    return bool(pen <= 10.0 or (isinstance(before, int | float) and pen <= WITHIN * before))


def step_sentence(st: Mapping[str, Any]) -> str:
    """One line a step reads as: "10 → 300 at 30 s: TTFT p50 +1.8 s, recovered in 12 s" (a rate
    step starts with "rate"), or "...: no penalty"."""
    frm, to = st.get("from"), st.get("to")
    what = "" if st.get("what") == "concurrency" else "rate "
    to_s = "unlimited" if what and to == 0 else f"{to:g}" if isinstance(to, int | float) else str(to)
    frm_s = f"{frm:g}" if isinstance(frm, int | float) else str(frm)
    head = f"{what}{frm_s} → {to_s} at {float(st.get('t') or 0.0):.0f} s"
    pen = st.get("penalty_ms")
    if not isinstance(pen, int | float):
        return f"{head}: no {TTFT.label} before and after to compare"
    if no_penalty(st):
        return f"{head}: no penalty"
    rec = st.get("recovery_s")
    if isinstance(rec, int | float):
        tail = f"recovered in {rec:.0f} s" if rec >= 10 else f"recovered in {rec:.1f} s"
    else:
        tail = "not recovered by the end"
    return f"{head}: {TTFT.at('p50').label} +{_secs(pen)}, {tail}"


def step_notes(summary: Mapping[str, Any]) -> list[str]:
    """The end of a run's sentences, one a step (at most the last 5, and how many before)."""
    steps = [s for s in summary.get("steps") or () if isinstance(s, Mapping)]
    notes = [step_sentence(s) for s in steps[-5:]]
    if len(steps) > 5:
        notes.insert(0, f"{len(steps)} steps; the last 5:")
    return notes


def step_lines(steps: Sequence[Any]) -> list[str]:
    """The summary table's block: a line a step, under "steps"."""
    rows = [s for s in steps if isinstance(s, Mapping)]
    return ["", "steps", *(f"  {step_sentence(s)}" for s in rows)] if rows else []
