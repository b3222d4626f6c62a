"""Prompts files in other people's formats (ShareGPT, OpenAI Batch input): read, checked, counted.

Why this module exists: `feed.py` streams and checks oxconsole's own JSONL; a file in another
format goes through the same two steps here, as a stream of `(where, prompt)` records, so the
checks (unique ids, pinned models, the length summary `validate` prints) are written once for
every such format.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass

from oxconsole.base.idset import repeated
from oxconsole.workload.problems import MAX_LINE_ERRORS, WorkloadError, error, printable, show
from oxconsole.workload.prompts.batch import batch_prompts
from oxconsole.workload.prompts.lengths import SAMPLE_MAX, length_stats
from oxconsole.workload.prompts.promptdata import LengthStats, Prompt
from oxconsole.workload.prompts.sharegpt import sharegpt_prompts
from oxconsole.workload.prompts.traces import TRACE_FORMATS, trace_prompts
from oxconsole.workload.schema import Workload


def records(
    w: Workload, label: str, bad: list[WorkloadError] | None = None
) -> Iterator[tuple[str, Prompt | None]]:
    """(where, prompt) for each entry of the prompts file; prompt None for an entry that is skipped.
    `bad` collects the bad lines of a Batch file rather than stopping at the first."""
    path = w.prompts.file
    assert path is not None
    try:
        open(path, "rb").close()
    except OSError as e:
        raise error(
            printable(str(w.path)), "prompts.file", "a readable file", f"{show(str(path))} ({e.strerror})"
        ) from None
    if w.prompts.format == "sharegpt":
        yield from sharegpt_prompts(path, label)
    elif w.prompts.format in TRACE_FORMATS:
        yield from trace_prompts(path, label, w.prompts.format, w.run.seed)
    else:
        yield from batch_prompts(path, label, {m.name: m.api for m in w.models}, bad)


@dataclass(frozen=True)
class FileCheck:
    count: int
    skipped: int
    models: frozenset[str]
    input_lengths: LengthStats | None
    output_lengths: LengthStats | None


def check_records(w: Workload, label: str) -> FileCheck:
    """Read the whole file once: every entry checked, ids unique, lengths summed up."""
    keys = array("q")
    count = skipped = 0
    pinned: set[str] = set()
    ins = array("q")
    outs = array("q")
    bad: list[WorkloadError] = []
    for _, p in records(w, label, bad):
        if p is None:
            skipped += 1
            continue
        count += 1
        keys.append(hash(p.id))
        if p.model is not None:
            pinned.add(p.model)
        if count <= SAMPLE_MAX:
            ins.append((p.input_chars + 3) // 4)
            if p.max_tokens is not None:
                outs.append(p.max_tokens)
    # every bad line and every id used twice, told together (up to a screenful), not the first
    bad += _repeated_ids(w, label, keys)
    if bad:
        told = [m for e in bad[:MAX_LINE_ERRORS] for m in e.errors]
        if len(bad) > MAX_LINE_ERRORS:
            told.append(f"{label}: ... and {len(bad) - MAX_LINE_ERRORS} more bad lines")
        raise WorkloadError(*told)
    if count == 0:
        what = "an empty file" if not skipped else f"{skipped} entries, none with a human turn and an answer"
        raise error(label, "", "at least one prompt", what)
    return FileCheck(count, skipped, frozenset(pinned), length_stats(ins), length_stats(outs))


def _repeated_ids(w: Workload, label: str, keys: array[int]) -> list[WorkloadError]:
    """Each entry whose id an earlier one has, in file order (only ids whose hash repeats are
    kept; bad lines, told already, are passed over)."""
    twice = repeated(keys)
    if not twice:
        return []
    out: list[WorkloadError] = []
    first: dict[str, str] = {}
    for where, p in records(w, label, []):
        if p is None or hash(p.id) not in twice:
            continue
        if p.id in first:
            out.append(
                error(label, f"{where}: id", f"a unique id ({first[p.id]} has the same id)", show(p.id))
            )
        else:
            first[p.id] = where
    return out
