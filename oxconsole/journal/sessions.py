"""Which sessions wrote a journal: when each started and how long it ran, kept in its manifest.

Why this module exists: `--resume` appends a new session to a journal, and the summary of the
whole journal must count every session and divide by the time the sessions ran, not by the wall
time from the first record to the last (which includes the hours between a crash and its
resume). Each session is recorded in `<results>.meta.json` under "sessions" when its clock starts
(`started_at`) and again when it ends (`running_s`). A session that never ended (a crash, kill -9)
has no running time there: readers take it from its records, from its start to the end of its last
request. Records older than the first session recorded (a journal written before sessions were
kept, or one whose manifest is missing) count as one more session, as long as they span.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oxconsole.journal.manifest import manifest_path, read_manifest, write_manifest_data

__all__ = ["Session", "SessionLog", "SessionSpans", "sessions_of"]

KEY = "sessions"
"""The manifest's key for the list of sessions (`manifest.write_manifest` keeps it)."""

SLACK_S = 0.001
"""Records are journaled with times rounded to the microsecond, and a session's first request
is due the instant its clock starts: a record this close before a session's start is its."""


@dataclass(frozen=True, slots=True)
class Session:
    started_at: float
    """Unix time the session's clock started (when it could first dispatch)."""
    running_s: float | None = None
    """How long it ran, start to end; None while it runs, or when it never ended cleanly."""
    warmup_s: float = 0.0
    """Of that, the time in `[[stages]]` warm-up stages (whose requests the summary leaves out)."""


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def sessions_of(manifest: Mapping[str, Any]) -> list[Session]:
    """The sessions a journal's manifest (`read_manifest`) records, by start (none without one).
    Entries that are not what a run writes are left out."""
    out: list[Session] = []
    raw = manifest.get(KEY)
    for d in raw if isinstance(raw, list) else ():
        start = _number(d.get("started_at")) if isinstance(d, dict) else None
        if start:
            out.append(Session(start, _number(d.get("running_s")), _number(d.get("warmup_s")) or 0.0))
    return sorted(out, key=lambda s: s.started_at)


class SessionLog:
    """This session's entry in the manifest: added when the run's clock starts, given its running
    time when the run ends. A manifest that cannot be written costs a warning, not the run."""

    def __init__(self, results: Path, warnings: list[str]) -> None:
        self.results = results
        self.warnings = warnings
        self.started_at: float | None = None

    def begin(self, started_at: float) -> None:
        self.started_at = started_at
        self._update(None)

    def end(self, running_s: float, warmup_s: float = 0.0) -> None:
        """The session ran `running_s` seconds, `warmup_s` of them in warm-up stages."""
        if self.started_at is not None:
            self._update(running_s, warmup_s)

    def _update(self, running_s: float | None, warmup_s: float = 0.0) -> None:
        assert self.started_at is not None
        data = read_manifest(self.results)
        sessions = [d for d in data.get(KEY) or () if isinstance(d, dict)]
        entry: dict[str, Any] = {"started_at": self.started_at, "running_s": running_s}
        if warmup_s:
            entry["warmup_s"] = round(warmup_s, 6)
        mine = [i for i, d in enumerate(sessions) if d.get("started_at") == self.started_at]
        if mine:
            sessions[mine[0]] = entry
        else:
            sessions.append(entry)
        data[KEY] = sessions
        try:
            write_manifest_data(self.results, data)
        except OSError as e:
            path = manifest_path(self.results)
            self.warnings.append(
                f"{path}: could not record this session ({e.strerror or e}); a summary of the whole "
                "journal will take its running time from its records"
            )


class SessionSpans:
    """The sessions of a journal being read: fed each record's times, it says how many sessions
    wrote the journal, when the first started and how long they ran in all."""

    def __init__(self, sessions: Sequence[Session]) -> None:
        self._sessions = sorted(sessions, key=lambda s: s.started_at)
        self._starts = [s.started_at for s in self._sessions]
        n = len(self._sessions) + 1  # slot 0: records older than the first session recorded
        self._first = [math.inf] * n
        self._last = [-math.inf] * n

    def add(self, t_scheduled: float, t_end: float) -> None:
        """A record, due at `t_scheduled`, whose request ended at `t_end` (unix seconds)."""
        i = bisect_right(self._starts, t_scheduled + SLACK_S)
        if t_scheduled < self._first[i]:
            self._first[i] = t_scheduled
        if t_end > self._last[i]:
            self._last[i] = t_end

    def count(self) -> int:
        """Sessions: every one recorded, and one more when records predate them."""
        return len(self._sessions) + (1 if self._first[0] < math.inf else 0)

    def started_at(self) -> float | None:
        """When the first session started (its first record's due time when not recorded)."""
        firsts = [self._first[0], *self._starts[:1]]
        t = min(firsts)
        return None if t == math.inf else t

    def running_s(self) -> float:
        """The sessions' running times added up (the gaps between sessions left out)."""
        total = 0.0
        if self._first[0] < math.inf:
            total += max(0.0, self._last[0] - self._first[0])
        for i, s in enumerate(self._sessions, 1):
            if s.running_s is not None:
                total += s.running_s
            elif self._last[i] > -math.inf:
                total += max(0.0, self._last[i] - s.started_at)
        return total

    def slot(self, t_scheduled: float) -> int:
        """The session (0: records older than the first recorded; then 1, 2, ... in order) a
        request due at `t_scheduled` was sent in."""
        return bisect_right(self._starts, t_scheduled + SLACK_S)

    def lengths(self) -> list[float]:
        """Each session's running time less its warm-up (as `running_s` less `warmup_s` adds them
        up), by `slot`."""
        out = [max(0.0, self._last[0] - self._first[0]) if self._first[0] < math.inf else 0.0]
        for i, s in enumerate(self._sessions, 1):
            if s.running_s is not None:
                out.append(max(0.0, s.running_s - s.warmup_s))
            else:
                out.append(max(0.0, self._last[i] - s.started_at) if self._last[i] > -math.inf else 0.0)
        return out

    def clock(self) -> Callable[[float, float], float]:
        """After every record was added: ``(t_scheduled, t)`` -> seconds of running time at unix
        time ``t`` of the request due at ``t_scheduled``: from its session's start, plus the
        running time of the sessions before it (the gaps between them left out). One session's
        records read as seconds since it started, as the run's own collector counted them."""
        origins: list[float] = []
        offsets: list[float] = []
        at = 0.0
        if self._first[0] < math.inf:  # records older than the first session recorded
            origins.append(self._first[0])
            offsets.append(0.0)
            at = max(0.0, self._last[0] - self._first[0])
        else:
            origins.append(0.0)
            offsets.append(0.0)
        for i, s in enumerate(self._sessions, 1):
            origins.append(s.started_at)
            offsets.append(at)
            if s.running_s is not None:
                at += s.running_s
            elif self._last[i] > -math.inf:
                at += max(0.0, self._last[i] - s.started_at)
        starts = self._starts

        def running(t_scheduled: float, t: float) -> float:
            i = bisect_right(starts, t_scheduled + SLACK_S)
            return offsets[i] + (t - origins[i])

        return running

    def warmup_s(self) -> float:
        """The time the sessions spent in warm-up stages, added up (as their runs recorded it)."""
        return sum(s.warmup_s for s in self._sessions)
