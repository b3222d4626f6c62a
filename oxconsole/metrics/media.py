"""Every kind of model in the figures: images and audio sent and received, documents ranked, the
real-time factor, whole run, per model and per phase, what their prices bill, and the live view.

Why this module exists: the summary, `oxconsole report` (a journal replayed), the snapshot and the
plan comparison must say the same of them; the counting is one `MediaStats` inside each
`RunStats` (`count`, O(1) a record), and the blocks it adds are made here. A run whose records
carry no media keys adds nothing: a text run's summary keeps its shape.

The totals are of the requests that ended ok (what was served, as `output_tokens_per_s` counts),
`per_s` divides them by the span's wall time, and `rtf` is over ok transcriptions and speech.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import astuple, dataclass, fields
from typing import Any

from oxconsole.base.figures import MEDIA_LIVE, RTF, Figure
from oxconsole.base.figures import MEDIA_TOTALS as TOTALS
from oxconsole.journal.records import RequestRecord, billed_units
from oxconsole.metrics.histogram import LogHistogram

__all__ = ["MEDIA_TOTALS", "MediaLive", "MediaStats", "has_media", "media_entry"]

MEDIA_TOTALS = tuple(f.leaf for f in TOTALS)
"""The summary's `media` totals (and `per_s` rates), in the order the contract lists them."""


class MediaStats:
    """Sums of the media keys of ok records (`sums`, by total), the real-time factor's histogram,
    and what the media prices bill; `seen` counts every record that carried a media key."""

    __slots__ = ("billed_audio_s", "billed_chars", "billed_images", "rtf", "seen", "sums")

    def __init__(self) -> None:
        self.seen = 0
        self.sums: dict[str, float] = dict.fromkeys(MEDIA_TOTALS, 0)
        self.rtf = LogHistogram()
        """Latency over the audio's seconds, of ok transcriptions and speech."""
        self.billed_images = 0
        self.billed_audio_s = 0.0
        self.billed_chars = 0

    def count(self, rec: RequestRecord) -> None:
        self.seen += 1
        if rec.status != "ok":
            return
        sums = self.sums
        for f in TOTALS:
            sums[f.leaf] += getattr(rec, f.journal) or 0
        if rec.rtf is not None:
            self.rtf.record(rec.rtf)
        if rec.api is not None:
            images, audio_s, chars = billed_units(
                rec.api, rec.images_out, rec.audio_in_s, rec.audio_out_s, rec.characters
            )
            self.billed_images += images
            self.billed_audio_s += audio_s
            self.billed_chars += chars

    def totals(self) -> dict[str, float]:
        """Each total by its key, seconds of audio to the millisecond."""
        return {f.leaf: round(self.sums[f.leaf], 3) if f.unit == "s" else self.sums[f.leaf] for f in TOTALS}


def media_entry(st: MediaStats, duration_s: float) -> dict[str, Any]:
    """What a summary block (whole run, a model, a phase) gains: `media` with the totals, `per_s`
    and `rtf` percentiles (null when no transcription or speech finished ok); nothing when no
    record carried a media key."""
    if not st.seen:
        return {}
    totals = st.totals()
    per_s = {k: round(v / duration_s, 3) if duration_s > 0 else 0.0 for k, v in totals.items()}
    rtf = dict(st.rtf.summary()) if st.rtf.n else dict.fromkeys(st.rtf.summary())
    return {"media": {**totals, "per_s": per_s, RTF.leaf: rtf}}


def has_media(s: Mapping[str, Any]) -> bool:
    """Whether a summary (or a model's or a phase's block) has a `media` block."""
    return isinstance(s.get("media"), Mapping)


@dataclass(frozen=True, slots=True)
class MediaLive:
    """The console's view of the kinds in the run: images and audio seconds per second, in and
    out, documents per second (the rates of `MEDIA_LIVE`, in its order), and the real-time
    factor's p50 and p99 (None when not measured)."""

    images_in_per_s: float
    images_out_per_s: float
    audio_in_per_s: float
    audio_out_per_s: float
    documents_per_s: float
    rtf_p50: float | None
    rtf_p99: float | None

    @classmethod
    def of(cls, st: MediaStats, span_s: float) -> MediaLive | None:
        """None when no record carried a media key (a text run shows no line)."""
        if not st.seen:
            return None
        entry = media_entry(st, span_s)["media"]
        return cls.from_block(entry)

    @classmethod
    def from_block(cls, m: Mapping[str, Any]) -> MediaLive:
        """From a summary's `media` block."""
        got_per_s, got_rtf = m.get("per_s"), m.get(RTF.leaf)
        per_s: Mapping[str, Any] = got_per_s if isinstance(got_per_s, Mapping) else {}
        rtf: Mapping[str, Any] = got_rtf if isinstance(got_rtf, Mapping) else {}
        return cls._made([_num(per_s.get(f.leaf)) for f in MEDIA_LIVE], rtf.get("p50"), rtf.get("p99"))

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any]) -> MediaLive | None:
        m = summary.get("media")
        return cls.from_block(m) if isinstance(m, Mapping) else None

    @classmethod
    def from_dict(cls, d: Any) -> MediaLive | None:
        """From a snapshot's JSON (its fields by name)."""
        if not isinstance(d, Mapping):
            return None
        *rates, p50, p99 = (d.get(f.name) for f in fields(cls))
        return cls._made([_num(v) for v in rates], p50, p99)

    @classmethod
    def _made(cls, rates: list[float | None], p50: Any, p99: Any) -> MediaLive:
        """From its rates in `MEDIA_LIVE`'s order (0 where unknown) and the RTF's p50 and p99."""
        values: list[Any] = [*(r or 0.0 for r in rates), _num(p50), _num(p99)]
        return cls(**{f.name: v for f, v in zip(fields(cls), values, strict=True)})

    def rates(self) -> tuple[tuple[Figure, float], ...]:
        """Each total's rate with its figure, in `MEDIA_LIVE`'s order (the fields')."""
        return tuple(zip(MEDIA_LIVE, astuple(self), strict=False))


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None
