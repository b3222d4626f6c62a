"""A server's `/metrics` answer (Prometheus text format 0.0.4) read into samples, never raising.

Why this module exists, and why not `prometheus_client.parser`: a scrape runs on the engine's
loop beside the requests, once a second per URL, so it must be cheap and it must survive any
answer (a login page, a JSON error, a truncated or binary body, a fork that prints one odd line).
Measured here (bench/bench_scrape.py, docs/server.md): on a 200-series vLLM exposition
`text_string_to_metric_families` takes ~4.1 ms of CPU and this parser ~0.26 ms; on 8 MiB of
valid series ~1.5 s against ~0.17 s. `prometheus_client` also raises on the first malformed line
(one odd line from a fork blanks the whole scrape) and renames a counter written without
`_total` (TGI's, Triton's) to name_total. Here a line that cannot be read is counted and
skipped; a body that is mostly unreadable, binary, not UTF-8, empty or over `MAX_BODY` is a
failed scrape (`Failed`, with the reason in words), which the caller counts and reports.

Only the series in `keep` (the vocabulary's, by default) have their labels parsed and values
kept: every other line is checked and its name noted (`Exposition.names`, which recognises the
engine), and nothing more. Histograms are kept as their `_bucket` series (label `le`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Final

from oxconsole.metrics.server.vocabulary import WANTED

__all__ = ["MAX_BODY", "Exposition", "Failed", "Labels", "Sample", "parse"]

MAX_BODY: Final = 8 * 2**20
"""The most of an answer read (the contract's 8 MiB); a longer one is a failed scrape."""

Labels = Mapping[str, str]
Sample = tuple[Labels, float]
"""One series' labels and value."""

_NO_LABELS: Final[Labels] = {}

_FAST: Final = re.compile(
    r"([a-zA-Z_:][a-zA-Z0-9_:]*+)"  # the metric name
    r"(?:\{([^}]*+)\})?"  # labels, when no quoted value holds a }
    r"[ \t]++(\S++)"  # the value
    r"(?:[ \t]++[-+0-9.eE]++)?"  # a timestamp
    r"[ \t]*+(?:#.*)?"  # an OpenMetrics exemplar
).fullmatch
"""Nearly every line: about 0.5 us. A line it cannot read goes to `_STRICT`. Every quantifier
is possessive (Python 3.11): no input makes a match backtrack (a nested `(a+|b)*` took 1.5 s on
a 40-byte line)."""
_STRICT: Final = re.compile(
    r"([a-zA-Z_:][a-zA-Z0-9_:]*+)"
    r'(?:\{((?:[^"}]++|"(?:[^"\\]++|\\.)*+")*+)\})?'  # quoted values may hold } and ,
    r"[ \t]++(\S++)"
    r"(?:[ \t]++[-+0-9.eE]++)?"
    r"[ \t]*+(?:#.*)?"
).fullmatch
_KEY = r'(?<![a-zA-Z0-9_])([a-zA-Z_][a-zA-Z0-9_]*+)[ \t]*+=[ \t]*+"'
"""A label name starts after no name character: a run of them is tried once, not from each of
its characters (quadratic in a long label block)."""
_PAIRS: Final = re.compile(_KEY + r'([^"\\]*+)"').findall
_ESCAPED_PAIRS: Final = re.compile(_KEY + r'((?:[^"\\]++|\\.)*+)"').findall

LABEL_CACHE_MAX: Final = 8192
"""Label blocks remembered across scrapes (a server writes the same ones each time): reading
labels costs ~3 us a series, a remembered block ~0.07 us. Emptied when full, so an 8 MiB
exposition of distinct series cannot hold more than this many (about 2 MB)."""
_label_cache: dict[str, Labels] = {}

EARLY_VERDICT_LINES: Final = 100
"""After this many non-comment lines, a body mostly unreadable is given up on at once (8 MiB of
prose otherwise costs ~190 ms to read through)."""
HEAD_LINES: Final = 1024
"""Lines split apart before the rest of the body (more than the early verdict needs)."""


@dataclass(frozen=True, slots=True)
class Exposition:
    """What one answer held: the kept series by name, every metric name seen, and how many
    sample lines were read and how many could not be."""

    series: Mapping[str, tuple[Sample, ...]]
    names: frozenset[str]
    lines: int
    bad_lines: int


@dataclass(frozen=True, slots=True)
class Failed:
    """A scrape that did not give metrics, and why, in words for the warning."""

    reason: str


def parse(body: bytes, keep: AbstractSet[str] | None = WANTED) -> Exposition | Failed:
    """Read `body`; keep the labels and values of the series named in `keep` (all when None).
    Never raises."""
    if len(body) > MAX_BODY:
        return Failed(f"answer over {MAX_BODY // 2**20} MiB")
    if not body or body.isspace():  # no stripped copy of 8 MiB
        return Failed("empty answer")
    if b"\x00" in body:
        return Failed("binary answer, not Prometheus text")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return Failed("answer is not UTF-8 text")
    kept: dict[str, list[Sample]] = {}
    names: set[str] = set()
    good = bad = 0
    fast, strict, cache = _FAST, _STRICT, _label_cache
    for line in _lines(text):
        if not line or line[0] == "#":
            continue
        if line[-1] == "\r":
            line = line[:-1]
            if not line:
                continue
        m = fast(line)
        if m is None or (m[2] and m[2].count('"') & 1):  # a } inside a quoted value, or no label block end
            m = strict(line)
        if m is None:
            bad += 1
            if bad == EARLY_VERDICT_LINES and good < bad:
                break
            continue
        name, inner, raw = m.groups()
        try:
            value = float(raw)
        except ValueError:
            bad += 1
            if bad == EARLY_VERDICT_LINES and good < bad:
                break
            continue
        good += 1
        names.add(name)
        if keep is not None and name not in keep:
            continue
        if inner:
            labels = cache.get(inner)
            if labels is None:
                labels = _labels(inner)
                if len(cache) >= LABEL_CACHE_MAX:
                    cache.clear()
                cache[inner] = labels
        else:
            labels = _NO_LABELS
        kept.setdefault(name, []).append((labels, value))
    if good == 0:
        return Failed("no Prometheus samples in the answer")
    if bad > good:
        return Failed(f"not Prometheus text: {bad} of {good + bad} lines read were unreadable")
    return Exposition({k: tuple(v) for k, v in kept.items()}, frozenset(names), good, bad)


def _lines(text: str) -> Iterator[str]:
    """The lines of `text`, the first `HEAD_LINES` split apart before the rest, so that a body
    given up on early (`EARLY_VERDICT_LINES`) is never split whole (~15 ms for 8 MiB)."""
    head = text.split("\n", HEAD_LINES)
    if len(head) <= HEAD_LINES:
        yield from head
        return
    yield from head[:-1]
    yield from head[-1].split("\n")


def _labels(inner: str) -> Labels:
    if "\\" not in inner:
        return dict(_PAIRS(inner))
    return {k: _unescape(v) for k, v in _ESCAPED_PAIRS(inner)}


def _unescape(v: str) -> str:
    """The text format's three escapes in a label value: \\\\, \\" and \\n."""
    out: list[str] = []
    i, n = 0, len(v)
    while i < n:
        c = v[i]
        if c == "\\" and i + 1 < n:
            nxt = v[i + 1]
            out.append("\n" if nxt == "n" else nxt)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)
