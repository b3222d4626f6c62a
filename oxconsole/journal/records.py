"""The per-request record: what the engine journals and what metrics and reports consume.

Why this module exists: the journal line, the metrics collector and `oxconsole report` must agree
on one shape; keeping it here (with no engine or UI imports) lets `report` rebuild a summary from
a journal alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oxconsole.base.figures import MEDIA_RECORDED, journal_keys
from oxconsole.base.safetext import valid_text
from oxconsole.workload.bounds import MAX_DURATION

RUN_TIMES = ("t_scheduled", "t_sent")
"""The times every record a run writes carries (unix seconds). A line without them (typed or
injected by hand) was not written by a run: readers ignore it rather than date a run to 1970."""

RECORD_TOKENS_MAX = 10**9
"""The most tokens one request's `usage` may count: a hundred times the longest context any model
has, and small enough that a billion records' sum stays a 64-bit integer (10^18 < 2^63). A server
claiming more is not believed: the count is clamped to it when the record is made, and a journal
line beyond it is refused when read."""

RECORD_MS_MAX = MAX_DURATION * 1000.0
"""The longest time (ms) a record may hold: no timeout, wait or run is longer than a year."""

_TEXT_FIELDS = (
    "id",
    "model",
    "endpoint",
    "status",
    "tokens_source",
    "error",
    "error_detail",
    "text",
    "tag",
    "pack",
    "check_error",
    "judge_error",
    "api",
)
"""The str fields of a record; a server's text (an error body, an answer) reaches several."""


OPTIONAL_COUNTS = ("reasoning_tokens", "cached_tokens", "tool_calls")
"""Token and call counts a record carries only when the server sent them (absent otherwise)."""

MEDIA_COUNTS = journal_keys(f for f in MEDIA_RECORDED if f.kind == "count")
"""What a request of another kind sent or got, counted (docs/media.md); absent when they do not apply."""

MEDIA_SECONDS = journal_keys(f for f in MEDIA_RECORDED if f.kind != "count")
"""Seconds of audio sent and received, and the real-time factor (latency over the audio's seconds)."""

MEDIA_KEYS = (*MEDIA_COUNTS, *MEDIA_SECONDS)

MEDIA_SECONDS_MAX = 1e9
"""The most seconds of audio (or the largest real-time factor) a record may hold: 30 years of audio.
A server's answer is not believed past it (clamped when the record is made, refused when read)."""


def billed_units(
    api: str | None,
    images_out: int | None,
    audio_in_s: float | None,
    audio_out_s: float | None,
    characters: int | None,
) -> tuple[int, float, int]:
    """What the prices per image, per audio minute and per million characters bill of one request
    (docs/media.md): (images generated, seconds of audio, characters). The audio is a
    transcription's input or speech's output; images and audio inside chat are billed through its
    tokens, so nothing here."""
    if api == "images":
        return images_out or 0, 0.0, 0
    if api == "transcriptions":
        return 0, audio_in_s or 0.0, 0
    if api == "speech":
        return 0, audio_out_s or 0.0, characters or 0
    return 0, 0.0, 0


@dataclass(slots=True)
class RequestRecord:
    id: str
    model: str
    endpoint: str
    status: str  # "ok" | "error"
    attempts: int
    t_scheduled: float  # unix seconds
    t_sent: float  # unix seconds, final attempt
    queue_ms: float
    latency_ms: float | None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_source: str = "usage"  # "usage" | "estimate"
    cost: float = 0.0
    error: str | None = None
    error_detail: str | None = None
    text: str | None = None
    tag: str | None = None
    backoff_ms: float = 0.0
    attempt_errors: dict[str, int] | None = None
    """Classes of failed attempts that were retried (or fell back), by count."""
    models_tried: list[str] | None = None
    """Only when a fallback was used: every model tried, in order (the last is `model`)."""
    model_attempts: list[int] | None = None
    """With `models_tried`: the attempts each of those models took (they add up to `attempts`)."""
    slo_ok: bool | None = None
    """With `[slo]`: whether this request was good (`SloConfig.good`); None = no SLO judged it."""
    stage: int | None = None
    """With [[stages]]: the stage (0-based) the request was sent in."""
    warmup: bool = False
    """Sent in a warm-up stage: journaled, but left out of the summary's statistics (and `report`'s)."""
    pack: str | None = None
    """The pack's id when this task was sent packed with others (`[packing]`)."""
    pack_size: int = 1
    """With `pack`: the tasks that pack carried."""
    repacked: bool = False
    """With `pack`: the pack's answer did not split, and this task was sent again alone."""
    ttfot_ms: float | None = None
    """Time to the first answer token (after any reasoning); `ttft_ms` when none came first."""
    reasoning_tokens: int | None = None
    """Reasoning tokens, counted inside `output_tokens` (from usage, else estimated)."""
    cached_tokens: int | None = None
    """Prompt tokens the server served from its prefix cache, inside `input_tokens`."""
    tool_calls: int | None = None
    """Tool calls in the answer."""
    valid: bool | None = None
    """With `[quality]`, on an ok record: whether its answer passed every check."""
    invalid_reason: str | None = None
    """With `valid` false: the first check it failed (`json`, `schema`, `regex`, `expected`, `judge`)."""
    check_timeout: bool = False
    """With `valid` false: that check ran past its deadline on this answer and was stopped."""
    check_error: str | None = None
    """With `valid` false: that check raised this exception (its class) on this answer."""
    judge_error: str | None = None
    """With `[quality] judge`, on an ok record: the judge request failed (its error class), so the
    answer stands unjudged (no `valid`)."""
    escalations: int = 0
    """Times the cascade sent it on to the next model (`models_tried` then lists them all)."""
    answers: list[dict[str, Any]] | None = None
    """The answers that did not stand and the judge requests, each with its model, tokens and
    cost (already inside `cost`): what each model asked was billed, for the per-model figures."""
    cascade_ms: float | None = None
    """With `answers`: from the first answer's send to the last byte of the one that stands, every
    model asked and judge request included (`latency_ms` is the final attempt's alone)."""
    api: str | None = None
    """The model's api when it is one of the other kinds (rerank, transcriptions, speech, images)."""
    images_in: int | None = None
    """Images sent (chat, Responses)."""
    image_pixels: int | None = None
    """Their pixels (width x height, summed), of those whose size is known (not remote URLs)."""
    audio_in_s: float | None = None
    """Seconds of audio sent: chat's `input_audio`, a transcription's file."""
    audio_out_s: float | None = None
    """Seconds of speech received."""
    images_out: int | None = None
    """Images generated."""
    documents: int | None = None
    """Documents a reranker was given."""
    rtf: float | None = None
    """Real-time factor of an ok transcription or speech: latency over its audio's seconds."""
    characters: int | None = None
    """Characters of speech's input text (what `price_per_1m_characters` bills)."""
    trial: int | None = None
    """With `run.trials` > 1: the trial (1..N) the request was sent in; its `id` ends in
    `@trialN` (`trial_id`), so that every trial's ids stay unique in the one journal."""

    def __post_init__(self) -> None:
        """The record boundary: what a server sent becomes text any encoder takes (a lone
        surrogate in an error body would fail every journal write) and token counts a sum can
        hold (a `usage` of 2^62 would overflow the summary). A few `isascii` flag reads and two
        comparisons per record."""
        for name in _TEXT_FIELDS:
            v = getattr(self, name)
            if v is not None and not v.isascii():
                setattr(self, name, valid_text(v))
        if not 0 <= self.input_tokens <= RECORD_TOKENS_MAX:
            self.input_tokens = min(max(0, self.input_tokens), RECORD_TOKENS_MAX)
        if not 0 <= self.output_tokens <= RECORD_TOKENS_MAX:
            self.output_tokens = min(max(0, self.output_tokens), RECORD_TOKENS_MAX)
        for key in OPTIONAL_COUNTS:
            v = getattr(self, key)
            if v is not None and not 0 <= v <= RECORD_TOKENS_MAX:
                setattr(self, key, min(max(0, v), RECORD_TOKENS_MAX))
        if self.api is not None or self.images_in is not None or self.audio_in_s is not None:
            _clamp_media(self)
        if self.models_tried:
            self.models_tried = [valid_text(m) for m in self.models_tried]
        if self.attempt_errors:
            self.attempt_errors = {valid_text(k): v for k, v in self.attempt_errors.items()}

    def attempts_on_model(self) -> int:
        """Attempts on the final model (`attempts` less those on models it fell back from)."""
        return self.model_attempts[-1] if self.model_attempts else self.attempts

    def fell_back_from(self) -> list[str]:
        """The models this request left for a fallback, in order (empty without a fallback); a
        model the cascade moved on from (its answer failed `[quality]`) is not one."""
        if not self.models_tried:
            return []
        if not self.escalations:
            return self.models_tried[:-1]
        judged = [a.get("model") for a in self.answers or () if a.get("judge") is not True]
        out = []
        for m in self.models_tried[:-1]:
            if m in judged:
                judged.remove(m)
            else:
                out.append(m)
        return out

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "model": self.model,
            "endpoint": self.endpoint,
            "status": self.status,
            "attempts": self.attempts,
            "t_scheduled": round(self.t_scheduled, 6),
            "t_sent": round(self.t_sent, 6),
            "queue_ms": _r(self.queue_ms),
            "latency_ms": _r(self.latency_ms),
        }
        if self.ttft_ms is not None:
            d["ttft_ms"] = _r(self.ttft_ms)
        if self.itl_ms is not None:
            d["itl_ms"] = _r(self.itl_ms)
        d["input_tokens"] = self.input_tokens
        d["output_tokens"] = self.output_tokens
        d["tokens_source"] = self.tokens_source
        d["cost"] = self.cost
        if self.error is not None:
            d["error"] = self.error
            d["error_detail"] = self.error_detail or ""
        if self.tag is not None:
            d["tag"] = self.tag
        if self.backoff_ms:
            d["backoff_ms"] = _r(self.backoff_ms)
        if self.attempt_errors:
            d["attempt_errors"] = self.attempt_errors
        if self.models_tried:
            d["models_tried"] = self.models_tried
            d["model_attempts"] = self.model_attempts
        if self.slo_ok is not None:
            d["slo_ok"] = self.slo_ok
        if self.stage is not None:
            d["stage"] = self.stage
        if self.warmup:
            d["warmup"] = True
        if self.pack is not None:
            d["pack"] = self.pack
            d["pack_size"] = self.pack_size
            if self.repacked:
                d["repacked"] = True
        if self.ttfot_ms is not None:
            d["ttfot_ms"] = _r(self.ttfot_ms)
        for key in OPTIONAL_COUNTS:
            v = getattr(self, key)
            if v is not None:
                d[key] = v
        if self.valid is not None or self.escalations or self.answers or self.judge_error is not None:
            _quality_json(self, d)
        if self.api is not None or self.images_in is not None or self.audio_in_s is not None:
            _media_json(self, d)
        if self.trial is not None:
            d["trial"] = self.trial
        if self.text is not None:
            d["text"] = self.text
        return d

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> RequestRecord:
        return cls(
            id=str(d["id"]),
            model=str(d.get("model", "")),
            endpoint=str(d.get("endpoint", "")),
            status=str(d.get("status", "error")),
            attempts=int(d.get("attempts", 1)),
            t_scheduled=float(d.get("t_scheduled", 0.0)),
            t_sent=float(d.get("t_sent", 0.0)),
            queue_ms=float(d.get("queue_ms") or 0.0),
            latency_ms=_f(d.get("latency_ms")),
            ttft_ms=_f(d.get("ttft_ms")),
            itl_ms=_f(d.get("itl_ms")),
            input_tokens=int(d.get("input_tokens") or 0),
            output_tokens=int(d.get("output_tokens") or 0),
            tokens_source=str(d.get("tokens_source", "usage")),
            cost=float(d.get("cost") or 0.0),
            error=_text(d, "error"),
            error_detail=_text(d, "error_detail"),
            text=_text(d, "text"),
            tag=_text(d, "tag"),
            backoff_ms=float(d.get("backoff_ms") or 0.0),
            attempt_errors=_tally(d.get("attempt_errors")),
            models_tried=_names(d.get("models_tried")),
            model_attempts=_counts(d.get("model_attempts"), d.get("models_tried")),
            slo_ok=d["slo_ok"] if isinstance(d.get("slo_ok"), bool) else None,
            stage=d["stage"] if type(d.get("stage")) is int else None,
            warmup=d.get("warmup") is True,
            **_pack_fields(d),
            ttfot_ms=_f(d.get("ttfot_ms")),
            **{k: d[k] for k in OPTIONAL_COUNTS if type(d.get(k)) is int},
            **_quality_fields(d),
            **_media_fields(d),
            trial=d["trial"] if type(d.get("trial")) is int and d["trial"] >= 1 else None,
        )


def _quality_fields(d: dict[str, Any]) -> dict[str, Any]:
    """`valid`, `invalid_reason`, `escalations` and `answers`, as far as the line carries them."""
    out: dict[str, Any] = {}
    if isinstance(d.get("valid"), bool):
        out["valid"] = d["valid"]
        reason = d.get("invalid_reason")
        if isinstance(reason, str) and not d["valid"]:
            out["invalid_reason"] = reason
            if d.get("check_timeout") is True:
                out["check_timeout"] = True
            if isinstance(d.get("check_error"), str):
                out["check_error"] = d["check_error"]
    elif isinstance(d.get("judge_error"), str):
        out["judge_error"] = d["judge_error"]
    esc = d.get("escalations")
    if type(esc) is int and esc > 0:
        out["escalations"] = esc
    answers = d.get("answers")
    if isinstance(answers, list):
        out["answers"] = [a for a in answers if isinstance(a, dict) and isinstance(a.get("model"), str)]
    ms = d.get("cascade_ms")
    if isinstance(ms, int | float) and not isinstance(ms, bool) and 0 <= ms <= RECORD_MS_MAX:
        out["cascade_ms"] = float(ms)
    return out


def _pack_fields(d: dict[str, Any]) -> dict[str, Any]:
    """`pack`, `pack_size` and `repacked`, when the line carries a pack id."""
    pack = d.get("pack")
    if not isinstance(pack, str):
        return {}
    size = d.get("pack_size")
    return {
        "pack": pack,
        "pack_size": size if type(size) is int and size >= 1 else 1,
        "repacked": d.get("repacked") is True,
    }


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


def _f(v: Any) -> float | None:
    return None if v is None else float(v)


def _text(d: dict[str, Any], key: str) -> str | None:
    """A text field of a line: a string, or absent; any other value is a line of the wrong type
    (TypeError: the reader skips it and says so, as any bad line)."""
    v = d.get(key)
    if v is None or isinstance(v, str):
        return v
    raise TypeError(f"{key}: expected a string, got {type(v).__name__}")


def _tally(v: Any) -> dict[str, int] | None:
    """`attempt_errors`: error class -> attempts, or absent; anything else is the wrong type."""
    if v is None:
        return None
    if not isinstance(v, dict) or not all(type(n) is int and n >= 0 for n in v.values()):
        raise TypeError(f"attempt_errors: expected an object of counts, got {type(v).__name__}")
    return v


def _names(v: Any) -> list[str] | None:
    return [str(x) for x in v] if isinstance(v, list) and len(v) > 1 else None


def _counts(v: Any, names: Any) -> list[int] | None:
    """`model_attempts`, only when it matches `models_tried` one for one."""
    if not isinstance(v, list) or not isinstance(names, list) or len(v) != len(names) or len(v) < 2:
        return None
    return [int(x) for x in v]


TRIAL_MARK = "@trial"
"""What a trial's request ids end in, before the trial's number (`trial_id`)."""


def trial_id(request_id: str, trial: int) -> str:
    """The id a request of trial `trial` is journaled under: ``p17@trial2``."""
    return f"{request_id}{TRIAL_MARK}{trial}"


def untrial_id(request_id: str, trial: int) -> str | None:
    """The request's own id when ``request_id`` is trial `trial`'s (`trial_id`), else None."""
    suffix = f"{TRIAL_MARK}{trial}"
    return request_id[: -len(suffix)] if request_id.endswith(suffix) else None


def has_run_times(d: Mapping[str, Any]) -> bool:
    """Whether a journal object carries the times a run writes (`RUN_TIMES`, positive numbers)."""
    for key in RUN_TIMES:
        v = d.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            return False
    return True


def _quality_json(rec: RequestRecord, d: dict[str, Any]) -> None:
    """The `[quality]` and cascade keys of a record's JSON, for one that has any."""
    if rec.valid is not None:
        d["valid"] = rec.valid
        if rec.invalid_reason is not None:
            d["invalid_reason"] = rec.invalid_reason
        if rec.check_timeout:
            d["check_timeout"] = True
        if rec.check_error is not None:
            d["check_error"] = rec.check_error
    elif rec.judge_error is not None:
        d["judge_error"] = rec.judge_error
    if rec.escalations:
        d["escalations"] = rec.escalations
    if rec.answers:
        d["answers"] = rec.answers
    if rec.cascade_ms is not None:
        d["cascade_ms"] = _r(rec.cascade_ms)


def _clamp_media(rec: RequestRecord) -> None:
    """Media counts within `RECORD_TOKENS_MAX`, seconds finite and within `MEDIA_SECONDS_MAX`."""
    for key in MEDIA_COUNTS:
        v = getattr(rec, key)
        if v is not None and not 0 <= v <= RECORD_TOKENS_MAX:
            setattr(rec, key, min(max(0, v), RECORD_TOKENS_MAX))
    for key in MEDIA_SECONDS:
        v = getattr(rec, key)
        if v is not None and not 0.0 <= v <= MEDIA_SECONDS_MAX:  # (NaN fails both)
            setattr(rec, key, MEDIA_SECONDS_MAX if v > 0 else 0.0)


def _media_json(rec: RequestRecord, d: dict[str, Any]) -> None:
    """The media keys of a record's JSON, each where it applies."""
    if rec.api is not None:
        d["api"] = rec.api
    for key in MEDIA_COUNTS:
        v = getattr(rec, key)
        if v is not None:
            d[key] = v
    for key in MEDIA_SECONDS:
        v = getattr(rec, key)
        if v is not None:
            d[key] = round(v, 6)


def _media_fields(d: dict[str, Any]) -> dict[str, Any]:
    """The media keys a journal line carries, each of its type and range (others left out)."""
    out: dict[str, Any] = {}
    api = d.get("api")
    if isinstance(api, str):
        out["api"] = api
    for key in MEDIA_COUNTS:
        v = d.get(key)
        if type(v) is int and 0 <= v <= RECORD_TOKENS_MAX:
            out[key] = v
    for key in MEDIA_SECONDS:
        v = d.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= MEDIA_SECONDS_MAX:
            out[key] = float(v)
    return out
