"""Every figure oxconsole shows, declared once: where a summary keeps it, where a journal record
keeps it, what it is called, its unit and how it reads, and its Prometheus name.

Why this module exists: one figure (TTFT, requests/s, cost per valid answer ...) is shown by the
console's panels, the summary table, Markdown, CSV, HTML, `report A B` and Prometheus, and built
by the summary's blocks. Each of those reads the figure's key, label and unit from its declaration
here and iterates the groups below rather than spelling keys out, so a figure reads the same
everywhere and a new one is its computation plus one declaration (as AIPerf's metric classes
declare tag, header and unit once). Plain data and the formatters of `units.py`; the bottom layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from oxconsole.base.units import NONE, fmt_count, fmt_money, fmt_ms, fmt_num, fmt_rate, number

__all__ = [
    "AUDIO_IN",
    "AUDIO_OUT",
    "BLOCK_KEYS",
    "CACHE_HIT_RATE",
    "CHARACTERS",
    "COMPARED",
    "COST",
    "COST_PER_TASK",
    "COST_PER_VALID",
    "DOCUMENTS",
    "DRAWN",
    "ERRORS",
    "ERROR_RATE",
    "EXPORTED",
    "FIGURES",
    "FROM_DUE",
    "GENERATION_TOKENS_PER_S",
    "GOODPUT",
    "GOOD_FRACTION",
    "IMAGES_IN",
    "IMAGES_OUT",
    "IMAGE_PIXELS",
    "ITL",
    "KINDS",
    "KV_USAGE",
    "LATENCY",
    "LATENCY_FROM_DUE",
    "MEDIA_COMPARED",
    "MEDIA_LIVE",
    "MEDIA_RECORDED",
    "MEDIA_TOTALS",
    "OK",
    "OUTPUT_TOKENS_PER_S",
    "PREEMPTIONS",
    "PREFIX_HIT_RATE",
    "PROMPT_TOKENS_PER_S",
    "QUEUE",
    "REASONING_SHARE",
    "REGISTRY",
    "REQUESTS",
    "REQUESTS_PER_S",
    "RTF",
    "RUNNING",
    "SCHEDULE_LAG",
    "SERVER_COMPARED",
    "SERVER_GAUGES",
    "SERVER_PERCENTILES",
    "SERVER_QUEUE",
    "SERVER_TTFT",
    "SERVER_VALUES",
    "SETTLING",
    "SPEC_ACCEPTANCE",
    "STATISTICS",
    "STEADY",
    "SUMMARY_TIMINGS",
    "TABLED",
    "TIMED",
    "TIMINGS",
    "TOKENS_IN",
    "TOKENS_OUT",
    "TTFOT",
    "TTFT",
    "TTFT_FROM_DUE",
    "VALID_FRACTION",
    "WAITING",
    "Column",
    "Figure",
    "at",
    "has_reasoning",
    "journal_keys",
    "nested",
    "percent",
    "quantile_column",
]

Kind = Literal["percentiles", "value", "rate", "count", "fraction", "money", "interval"]
"""What a figure's value is: a percentile block (`{"mean", "p50", ... "max"}`, each null when
nothing was measured), one number, a rate (per second), a count, a fraction (0 to 1, read as a
percentage), an amount of money (in the currency of the prices), or a `[low, high]` interval."""

KINDS: tuple[Kind, ...] = ("percentiles", "value", "rate", "count", "fraction", "money", "interval")

BLOCK_KEYS = ("mean", "p50", "p90", "p95", "p99", "max")
"""A percentile block's keys, in the order a table shows them."""


def at(d: Any, key: str) -> Any:
    """The value at a dotted ``key`` in nested mappings (``"throughput.requests_per_s"``), or None
    where a level is missing or is not a mapping."""
    cur = d
    for k in key.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(k)
    return cur


def percent(v: Any) -> str:
    """A fraction (0 to 1) as a percentage with one decimal (``93.1%``), `–` when unknown."""
    x = number(v)
    return NONE if x is None else f"{100 * x:.1f}%"


def _interval(fmt: Callable[[Any], str]) -> Callable[[Any], str]:
    def text(v: Any) -> str:
        if not isinstance(v, list | tuple) or len(v) != 2:
            return NONE
        return f"[{fmt(v[0])}, {fmt(v[1])}]"

    return text


def _rate(v: Any) -> str:
    x = number(v)
    return NONE if x is None else fmt_rate(x)


def _count(v: Any) -> str:
    x = number(v)
    return NONE if x is None else fmt_count(x)


_BY_UNIT: dict[str, Callable[[Any], str]] = {"ms": fmt_ms}
_BY_KIND: dict[str, Callable[[Any], str]] = {
    "rate": _rate,
    "count": _count,
    "fraction": percent,
    "money": fmt_money,
}


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure, declared once. Every table and report that shows it reads these fields."""

    key: str
    """Where a summary (or a model's, a phase's, a stage's block) keeps it, dotted:
    ``"ttft_ms"``, ``"throughput.requests_per_s"``, ``"cost.per_valid"``."""
    label: str
    """What a table's head calls it: ``"TTFT"``, ``"requests/s"``."""
    kind: Kind
    unit: str = ""
    """The unit of the value as kept (``"ms"``; a rate is per second, a fraction 0 to 1)."""
    name: str = ""
    """In words, where there is room (a chart's caption, a help text, Prometheus' HELP)."""
    short: str = ""
    """Where columns are tight (``"lat"``, ``"req/s"``); the label when not given."""
    title: str = ""
    """What the latency panel's histogram is titled (``"end-to-end"``); the label when not given."""
    journal: str = ""
    """Its key in a journal record (a `RequestRecord` field) when it is measured per request."""
    id: str = ""
    """Its name in `report A B`'s rows (``"requests_per_s"``); the key when not given."""
    prometheus: str = ""
    """The exported metric's name after ``oxconsole_`` (none: not exported)."""
    lower_is_better: bool = True
    member: Kind = "value"
    """What each member of a percentile block is (`at`): a value in the unit, or a fraction."""
    fmt: Callable[[Any], str] | None = field(default=None, compare=False)
    """How one value reads (with its unit); by the kind and unit when not given."""
    when: Callable[[Any], bool] | None = field(default=None, compare=False)
    """A figure not every run shows: whether a summary block has its row (None: every block)."""

    def __post_init__(self) -> None:
        for attr, default in (
            ("name", self.label),
            ("short", self.label),
            ("title", self.label),
            ("id", self.key),
        ):
            if not getattr(self, attr):
                object.__setattr__(self, attr, default)

    @property
    def leaf(self) -> str:
        """The last part of its key: its name inside its block (``requests_per_s`` in
        ``throughput``)."""
        return self.key.rpartition(".")[2]

    @property
    def display(self) -> str:
        """The unit a person reads: ``%`` for a fraction, else the unit kept (a rate's label says
        its "/s" itself)."""
        return "%" if self.kind == "fraction" else self.unit

    @property
    def header(self) -> str:
        """The label with its display unit, for a table's head (``TTFT p50 ms``, ``error %``)."""
        return f"{self.label} {self.display}" if self.display else self.label

    def at(self, q: str) -> Figure:
        """One member of a percentile block as a figure of its own: ``TTFT.at("p50")`` is
        ``ttft_ms.p50``, labelled ``TTFT p50``."""
        if self.kind != "percentiles":
            raise ValueError(f"{self.key} is a {self.kind}, not a percentile block")
        return self._variant(f"{self.key}.{q}", f"{self.id}.{q}", f"{self.label} {q}", self.member, f" {q}")

    def per_second(self) -> Figure:
        """A total's rate over the run's wall time, kept in its block's `per_s`
        (``media.per_s.images_in``, labelled ``images in/s``; seconds of audio ``audio in s/s``)."""
        block, _, leaf = self.key.rpartition(".")
        key = f"{block}.per_s.{leaf}"
        return self._variant(
            key, key, f"{self.header}/s", "rate", "/s",
            name=f"{self.name} per second", unit="", journal="", lower_is_better=False,
        )  # fmt: skip

    def _variant(self, key: str, id: str, label: str, kind: Kind, suffix: str, **more: Any) -> Figure:
        """A figure made of this one (not exported): its short name and title with `suffix`."""
        return replace(
            self,
            key=key,
            id=id,
            label=label,
            kind=kind,
            short=f"{self.short}{suffix}",
            title=f"{self.title}{suffix}",
            prometheus="",
            **more,
        )

    def of(self, block: Any) -> Any:
        """Its value in a summary block (None where the block does not have it)."""
        return at(block, self.key)

    def value(self, block: Any) -> float | None:
        """Its value in a summary block as a finite float, or None."""
        return number(self.of(block))

    def text(self, v: Any) -> str:
        """One value as it reads, with its unit (`–` for none)."""
        if self.fmt is not None:
            return self.fmt(v)
        plain = _BY_UNIT.get(self.unit) or _BY_KIND.get(self.kind) or (lambda x: fmt_num(x, 2))
        return _interval(plain)(v) if self.kind == "interval" else plain(v)

    def shown_in(self, block: Any) -> bool:
        """Whether a table of this summary block has the figure's row (see `when`)."""
        return self.when is None or self.when(block)

    def scaled(self, v: float | None) -> float | None:
        """The value in its display unit (a fraction as a percentage), for a table of numbers."""
        return None if v is None else 100.0 * v if self.kind == "fraction" else v


def has_reasoning(block: Any) -> bool:
    """Whether a summary block (the run's, a model's) counts reasoning or cached tokens, or tool
    calls: the runs whose tables show TTFOT beside TTFT (a plain stream's TTFOT is its TTFT)."""
    tokens = at(block, "tokens")
    return (isinstance(tokens, Mapping) and bool({"reasoning", "cached"} & set(tokens))) or bool(
        at(block, "tool_calls")
    )


# -- per request: percentile blocks of ok requests --------------------------------------------

TTFT = Figure(
    "ttft_ms", "TTFT", "percentiles", "ms",
    name="time to first token", journal="ttft_ms", prometheus="ttft_seconds",
)  # fmt: skip
TTFOT = Figure(
    "ttfot_ms", "TTFOT", "percentiles", "ms",
    name="time to first answer token", journal="ttfot_ms", when=has_reasoning,
)  # fmt: skip
"""The first answer token, after any reasoning: shown beside TTFT for runs with reasoning."""
ITL = Figure(
    "itl_ms", "ITL", "percentiles", "ms",
    name="mean gap between tokens", title="inter-token", journal="itl_ms", prometheus="itl_seconds",
)  # fmt: skip
LATENCY = Figure(
    "latency_ms", "latency", "percentiles", "ms",
    name="send to last byte", short="lat", title="end-to-end", journal="latency_ms",
    prometheus="latency_seconds",
)  # fmt: skip
QUEUE = Figure(
    "queue_ms", "queue", "percentiles", "ms",
    name="waiting for the limiter and a slot", title="client queue", journal="queue_ms",
)  # fmt: skip

TTFT_FROM_DUE = Figure(
    "ttft_from_due_ms", "TTFT from due", "percentiles", "ms", name="TTFT from the due time"
)
LATENCY_FROM_DUE = Figure(
    "latency_from_due_ms", "latency from due", "percentiles", "ms", name="latency from the due time"
)
SCHEDULE_LAG = Figure("schedule_lag_ms", "schedule lag", "percentiles", "ms", name="sent after the due time")

# -- the run's rates, counts and money --------------------------------------------------------

REQUESTS_PER_S = Figure(
    "throughput.requests_per_s", "requests/s", "rate",
    short="req/s", id="requests_per_s", lower_is_better=False,
)  # fmt: skip
OUTPUT_TOKENS_PER_S = Figure(
    "throughput.output_tokens_per_s", "output tok/s", "rate",
    name="output tokens/s", short="tok/s", id="output_tokens_per_s", lower_is_better=False,
)  # fmt: skip
REQUESTS = Figure(
    "requests.total", "requests", "count", name="finished requests", short="reqs", prometheus="requests"
)
OK = Figure("requests.ok", "ok", "count", name="ok requests", lower_is_better=False)
ERRORS = Figure("requests.error", "error", "count", name="requests that ended in error", short="err")
TOKENS_IN = Figure(
    "tokens.input", "tokens in", "count", name="input tokens", short="in", journal="input_tokens"
)
TOKENS_OUT = Figure(
    "tokens.output", "tokens out", "count",
    name="output tokens", short="out", journal="output_tokens", prometheus="output_tokens",
)  # fmt: skip
COST = Figure(
    "cost.total", "cost", "money", name="cost in the prices' currency", journal="cost", prometheus="cost"
)
COST_PER_TASK = Figure("cost.per_task", "cost/task", "money", name="cost per task")
COST_PER_VALID = Figure(
    "cost.per_valid", "cost/valid", "money", name="cost per valid answer", id="cost_per_valid"
)
ERROR_RATE = Figure("error_rate", "error", "fraction", name="requests that ended in error")
"""Not a key of the summary (its `requests.error` over `requests.total`): `report A B`'s row."""

# -- with [slo], [quality], reasoning ---------------------------------------------------------

GOODPUT = Figure(
    "goodput.requests_per_s",
    "goodput/s",
    "rate",
    name="good requests/s",
    short="good/s",
    lower_is_better=False,
)
GOOD_FRACTION = Figure("goodput.fraction", "good", "fraction", name="good requests", lower_is_better=False)
VALID_FRACTION = Figure("quality.fraction", "valid", "fraction", name="valid answers", lower_is_better=False)
CACHE_HIT_RATE = Figure(
    "cache_hit_rate", "cache hit", "fraction", name="cached / input tokens", lower_is_better=False
)
REASONING_SHARE = Figure("reasoning_share", "reasoning", "fraction", name="reasoning / output tokens")
"""Not a key of the summary (its `tokens.reasoning` over `tokens.output`): the console's and
`report A B`'s figure."""

# -- media (issue 37): totals of the ok requests, their rates, the real-time factor -----------


def _media(leaf: str, label: str, name: str, short: str = "", unit: str = "") -> Figure:
    """A media total: `media.<leaf>` in a summary block, `<leaf>` in a journal record; seconds of
    audio where `unit` is "s", else a count."""
    return Figure(f"media.{leaf}", label, "value" if unit else "count", unit, name, short, journal=leaf)


IMAGES_IN = _media("images_in", "images in", "images sent", "img")
IMAGE_PIXELS = _media("image_pixels", "pixels in", "image pixels sent")
AUDIO_IN = _media("audio_in_s", "audio in", "seconds of audio sent", "heard", "s")
AUDIO_OUT = _media("audio_out_s", "audio out", "seconds of audio received", "spoken", "s")
IMAGES_OUT = _media("images_out", "images out", "images received", "drawn")
DOCUMENTS = _media("documents", "documents", "documents ranked", "docs")
CHARACTERS = _media("characters", "characters", "characters of speech input")
"""Kept per request for what a price bills (`per_1m_characters`); not a total of the summary."""
RTF = Figure(
    "media.rtf", "RTF", "percentiles",
    name="real-time factor: latency over the audio's seconds", journal="rtf",
)  # fmt: skip


# -- the server (issue 35): one endpoint's block of a summary's `server`, from its /metrics --------
# Keys are within the endpoint's block; `short` is what `report A B` calls the figure after "srv ".

RUNNING = Figure("running", "running", "percentiles", name="requests running in the engine", short="running")
WAITING = Figure("waiting", "waiting", "percentiles", name="requests waiting in the engine", short="waiting")
KV_USAGE = Figure("kv_usage", "KV", "percentiles", name="KV cache usage", short="KV", member="fraction")
PREFIX_HIT_RATE = Figure(
    "prefix_hit_rate", "prefix hits", "fraction",
    name="prompt tokens served from the prefix cache", short="prefix hit", lower_is_better=False,
)  # fmt: skip
PREEMPTIONS = Figure("preemptions", "preemptions", "count", name="requests preempted by the engine")
PROMPT_TOKENS_PER_S = Figure(
    "prompt_tokens_per_s", "prompt", "rate",
    name="prompt tokens/s the engine read", short="prompt tok/s", lower_is_better=False,
)  # fmt: skip
GENERATION_TOKENS_PER_S = Figure(
    "generation_tokens_per_s", "generation", "rate",
    name="tokens/s the engine generated", short="gen tok/s", lower_is_better=False,
)  # fmt: skip
SPEC_ACCEPTANCE = Figure(
    "spec_acceptance", "spec accepted", "fraction",
    name="draft tokens accepted by speculative decoding", lower_is_better=False,
)  # fmt: skip
SERVER_TTFT = Figure("server_ttft_ms", "TTFT", "percentiles", "ms", name="the engine's time to first token")
SERVER_QUEUE = Figure("server_queue_ms", "queue", "percentiles", "ms", name="the engine's queue time")


# -- groups the consumers iterate -------------------------------------------------------------

TIMINGS: tuple[Figure, ...] = (TTFT, ITL, LATENCY, QUEUE)
"""The timings every run has, in the order tables show them and `h` cycles through them."""

SUMMARY_TIMINGS: tuple[Figure, ...] = (LATENCY, TTFT, ITL, QUEUE)
"""The same in the order a summary's JSON keeps them (the contract's)."""

TABLED: tuple[Figure, ...] = (TTFT, TTFOT, ITL, LATENCY, QUEUE)
"""The timings a summary's tables show, each where its block has it (`Figure.shown_in`)."""

TIMED: tuple[Figure, ...] = (TTFT, ITL, LATENCY)
"""The timings drawn over time in the HTML report and kept per slot of its timeline."""

DRAWN: tuple[Figure, ...] = (TTFT, TTFOT, ITL, LATENCY)
"""The timings whose distributions the HTML report draws (and `report A B` bootstraps), each
where the run has it."""

FROM_DUE: tuple[Figure, ...] = (TTFT_FROM_DUE, LATENCY_FROM_DUE, SCHEDULE_LAG)
"""An open-loop run's figures from each request's due time (`metrics/due.py`)."""

EXPORTED: tuple[Figure, ...] = (TTFT, ITL, LATENCY)
"""The timings Prometheus gets as histograms (in seconds, by model)."""

FIGURES: tuple[Figure, ...] = (
    REQUESTS_PER_S,
    OUTPUT_TOKENS_PER_S,
    *(TTFT.at(q) for q in ("p50", "p90", "p99")),
    *(ITL.at(q) for q in ("p50", "p99")),
    *(LATENCY.at(q) for q in ("p50", "p90", "p99")),
    ERROR_RATE,
)
"""The single figures `report A B ...` compares for every run, in the order shown."""

COMPARED: dict[str, tuple[Figure, ...]] = {
    "goodput": (GOODPUT, GOOD_FRACTION),
    "reasoning": (TTFOT.at("p50"), TTFOT.at("p99"), REASONING_SHARE, CACHE_HIT_RATE),
}
"""The rows `report A B ...` adds when some run has them: with `[slo]`, with reasoning or a cache."""

MEDIA_TOTALS: tuple[Figure, ...] = (IMAGES_IN, IMAGE_PIXELS, AUDIO_IN, AUDIO_OUT, IMAGES_OUT, DOCUMENTS)
"""A summary block's `media` totals (and `per_s` rates), in the order the contract lists them."""

MEDIA_RECORDED: tuple[Figure, ...] = (
    IMAGES_IN, IMAGE_PIXELS, IMAGES_OUT, DOCUMENTS, CHARACTERS, AUDIO_IN, AUDIO_OUT, RTF,
)  # fmt: skip
"""The media keys of a journal record, in the order a record's JSON writes them."""

MEDIA_LIVE: tuple[Figure, ...] = (IMAGES_IN, IMAGES_OUT, AUDIO_IN, AUDIO_OUT, DOCUMENTS)
"""The totals whose rates the console's media line shows, in its order."""

MEDIA_COMPARED: tuple[Figure, ...] = (
    *(f.per_second() for f in MEDIA_LIVE),
    RTF.at("p50"),
    RTF.at("p99"),
)
"""The figures `report A B ...` adds for runs with media (labels fit its 16 columns)."""

SERVER_GAUGES: tuple[Figure, ...] = (RUNNING, WAITING, KV_USAGE)
"""The server's gauges: summarised by their median and maximum over the scrape rounds."""

SERVER_VALUES: tuple[Figure, ...] = (
    PREFIX_HIT_RATE, PREEMPTIONS, PROMPT_TOKENS_PER_S, GENERATION_TOKENS_PER_S, SPEC_ACCEPTANCE,
)  # fmt: skip
"""The server's figures summarised as one value over the whole span (a ratio, a count, a rate)."""

SERVER_PERCENTILES: tuple[Figure, ...] = (SERVER_TTFT, SERVER_QUEUE)
"""The server's figures summarised as p50 / p90 / p99 of the span's observations."""

SERVER_COMPARED: tuple[Figure, ...] = (
    RUNNING.at("p50"),
    WAITING.at("p50"),
    WAITING.at("max"),
    KV_USAGE.at("p50"),
    PREFIX_HIT_RATE,
    PREEMPTIONS,
    PROMPT_TOKENS_PER_S,
    GENERATION_TOKENS_PER_S,
    SERVER_TTFT.at("p50"),
    SERVER_QUEUE.at("p50"),
)
"""The server's figures `report A B ...` adds for runs whose server was read."""

STATISTICS: tuple[Figure, ...] = (
    REQUESTS_PER_S, TTFT.at("p50"), TTFT.at("p99"), LATENCY.at("p50"), LATENCY.at("p99"),
)  # fmt: skip
"""The figures a summary's `trials` block (and a run's `ci`) holds, in the contract's order."""

SETTLING: tuple[Figure, ...] = (TTFT.at("p50"), LATENCY.at("p50"), REQUESTS_PER_S)
"""The figures a phase's `ci` holds while it settles, in the order the console names them."""

STEADY: tuple[Figure, ...] = (REQUESTS_PER_S, OUTPUT_TOKENS_PER_S)
"""The rates a summary's `steady` window keeps (by their ids), as `report A B` shows them."""

REGISTRY: dict[str, Figure] = {
    f.id: f
    for f in (
        *TIMINGS,
        TTFOT,
        *FROM_DUE,
        REQUESTS_PER_S,
        OUTPUT_TOKENS_PER_S,
        REQUESTS,
        OK,
        ERRORS,
        TOKENS_IN,
        TOKENS_OUT,
        COST,
        COST_PER_TASK,
        COST_PER_VALID,
        ERROR_RATE,
        GOODPUT,
        GOOD_FRACTION,
        VALID_FRACTION,
        CACHE_HIT_RATE,
        REASONING_SHARE,
    )
}
"""Every figure of every run, by id: what a text run's record and summary hold. The media and server
figures, kept only by runs that have them, are declared in their own groups above."""


def nested(values: Iterable[tuple[Figure, Any]]) -> dict[str, Any]:
    """A summary block holding each value at its figure's key (what `Figure.of` reads back)."""
    out: dict[str, Any] = {}
    for f, v in values:
        *path, leaf = f.key.split(".")
        d = out
        for k in path:
            d = d.setdefault(k, {})
        d[leaf] = v
    return out


def journal_keys(figures: Iterable[Figure]) -> tuple[str, ...]:
    """The journal keys of the figures measured per request."""
    return tuple(f.journal for f in figures if f.journal)


@dataclass(frozen=True, slots=True)
class Column:
    """A figure in a fixed-width column of a text table (the summary table's, the stages'):
    right-aligned in `width`, a count as `fmt_count`, money as `fmt_money`, any other figure
    with `decimals`; `–` where the block has no value."""

    figure: Figure
    width: int
    decimals: int = 0
    head: str = ""
    """The column's head; the figure's short name when not given."""

    def title(self) -> str:
        return f"{self.head or self.figure.short:>{self.width}}"

    def cell(self, block: Any) -> str:
        v = self.figure.value(block)
        kind = self.figure.kind
        if v is None:
            text = NONE
        elif kind == "count":
            text = fmt_count(v)
        elif kind == "money":
            text = fmt_money(v)
        else:
            text = fmt_num(v, self.decimals)
        return f"{text:>{self.width}}"


def quantile_column(f: Figure, q: str, width: int) -> Column:
    """A percentile of a timing in whole units, headed the way the text tables say it (``p50 lat``)."""
    return Column(f.at(q), width, 0, f"{q} {f.short.lower()}")
