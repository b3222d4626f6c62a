"""What reading the prompts gives: one `Prompt` per request, and `PromptStats` of a whole pass.

Why this module exists: these are not keys of the workload file (`workload/schema.py` holds those) but the
values the prompt sources produce (`feed.py`, `sources.py`, `batch.py`, `sharegpt.py`) and the
engine, `validate` and the journal read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oxconsole.workload.prompts.mediafiles import MediaFile
    from oxconsole.workload.schema import SyntheticImages


@dataclass(frozen=True, slots=True)
class ImageInput:
    """One image a prompt sends: a URL sent as given (`https://...`, or a data URL the line
    wrote), or a file read once and sent as a data URL."""

    url: str | None = None
    file: MediaFile | None = None
    pixels: int | None = None
    """Width x height, where the bytes are known (files and data URLs; not a remote URL)."""


@dataclass(frozen=True, slots=True)
class PromptMedia:
    """What a prompt sends besides its text; each API takes the parts it has a place for
    (`engine/send/mediabodies.py`): chat and Responses the images and the audio, a transcription
    the audio, a reranker the query and documents."""

    images: tuple[ImageInput, ...] = ()
    """A prompts line's `images`."""
    audio: MediaFile | None = None
    """A prompts line's `audio` file."""
    synthetic_images: SyntheticImages | None = None
    """Generated PNGs of this size, a different one per request (`synthetic.images`)."""
    audio_s: float = 0.0
    """Seconds of generated WAV (`synthetic.audio_s`); 0 = none."""
    seed: int = 0
    """What the generated images and audio are made from: the same id, the same bytes (so
    `--resume` and retries send what the first attempt sent)."""
    query: str | None = None
    """A reranker's query (a line's `query`; else the prompt's text)."""
    documents: tuple[str, ...] | None = None
    """A reranker's documents."""

    @property
    def image_count(self) -> int:
        syn = self.synthetic_images
        return len(self.images) + (syn.count if syn is not None else 0)

    @property
    def image_pixels(self) -> int | None:
        """Pixels of the images whose size is known; None when none is."""
        known = [i.pixels for i in self.images if i.pixels is not None]
        syn = self.synthetic_images
        if syn is not None:
            known.append(syn.count * syn.width * syn.height)
        return sum(known) if known else None

    @property
    def audio_seconds(self) -> float | None:
        if self.audio is not None:
            return self.audio.seconds
        return self.audio_s or None


@dataclass(frozen=True)
class Prompt:
    id: str
    """Unique per run (repeats carry "#n")."""
    messages: list[dict[str, Any]]
    """Chat messages sent as-is."""
    tag: str | None = None
    """Routing tag (matched by [[routing.rules]])."""
    model: str | None = None
    """Pin this prompt to one model (bypasses routing)."""
    max_tokens: int | None = None
    """Per-prompt cap (synthetic prompts set it from output_tokens); None = the model's max_tokens."""
    input_chars: int = 0
    """Characters of message content, for input-token estimates (~4 chars a token)."""
    body: dict[str, Any] | None = None
    """A request body to send as given (an OpenAI Batch input line's), its model set to the model's
    name; None = the body is built from `messages` and the model's settings."""
    turns: tuple[str, ...] | None = None
    """A multi-turn session's user turns (a prompts line's `"turns"`): the engine sends them one
    by one, each with the whole history (`engine/send/conversations.py`); None = a single request."""
    input_tokens: int | None = None
    """Its input tokens counted by `[prompts] tokenizer`; None = estimated from `input_chars`."""
    keep_text: bool = False
    """Read the answer's text even when `save_text` is off (a session's turn: the next turn's
    history needs it)."""
    expected: str | None = None
    """The right answer (a prompts line's `"expected"`), for `[quality] expected`."""
    due: float | None = None
    """A trace's row: seconds after the first row that it is due (`traces.py`, replayed at
    `run.trace_speed`); None = the run's arrival decides."""
    media: PromptMedia | None = None
    """Images, audio, a query and documents (docs/media.md); None = text only."""


@dataclass(frozen=True)
class PromptStats:
    """What `check_prompts` learned from one full pass over the prompt source."""

    count: int
    """Prompts in one pass."""
    total_requests: int | None
    """Requests the run will send; None = unbounded (cycling until run.duration)."""
    tags: frozenset[str] = frozenset()
    """Tags seen on prompts."""
    models_referenced: frozenset[str] = frozenset()
    """Models named by prompts' own `model` key."""
    input_lengths: LengthStats | None = None
    """Prompt lengths in tokens (estimated) over the pass, where the source has varying lengths."""
    output_lengths: LengthStats | None = None
    """max_tokens over the pass, where the source sets them per prompt."""
    skipped: int = 0
    """Entries of the file that give no prompt (ShareGPT conversations without a human turn and
    an answer)."""
    sessions: int = 0
    """Multi-turn sessions (prompts with `"turns"`) in one pass."""
    turns: int = 0
    """Their turns, all together (one request each)."""


@dataclass(frozen=True)
class LengthStats:
    """Lengths in tokens seen in one pass: how many, their mean, median, 99th percentile, extremes."""

    count: int
    """Lengths seen (one per prompt of the pass)."""
    mean: float
    """Their mean, over all of them."""
    p50: int
    """Median, over the first `sampled`."""
    p99: int
    """99th percentile, over the first `sampled`."""
    min: int
    """Shortest, over all of them."""
    max: int
    """Longest, over all of them."""
    sampled: int
    """How many of them the percentiles are taken over (the first ones, when there are very many)."""


def content_chars(messages: object) -> int:
    """Characters of message content (strings, or the text of content parts): a prompt's
    `input_chars`, and what the simulator counts of a request's messages."""
    if not isinstance(messages, list):
        return 0
    total = 0
    for m in messages:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, str):
            total += len(c)
        elif isinstance(c, list):
            for part in c:
                if isinstance(part, dict):
                    text = part.get("text")
                    if isinstance(text, str):
                        total += len(text)
    return total
