"""The run's prompts: streamed from the file (never loaded whole), inline items or synthetic text.

Why this module exists: `iter_prompts` feeds the engine one prompt at a time, cycling as the run
asks; `check_prompts` validates the whole source before anything is sent (one line at a time, ids
checked unique by their 64-bit hashes).
"""

from __future__ import annotations

import dataclasses
import itertools
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from oxconsole.base.idset import repeated
from oxconsole.workload.bounds import MAX_TOKENS, fmt_limit
from oxconsole.workload.problems import (
    MAX_LINE_ERRORS,
    WorkloadError,
    did_you_mean,
    error,
    fail,
    printable,
    show,
)
from oxconsole.workload.prompts.boundedlines import Line, bounded_lines
from oxconsole.workload.prompts.lengths import SAMPLE_MAX, draws, length_stats
from oxconsole.workload.prompts.mediaprompts import (
    MEDIA_KEYS,
    check_needs,
    line_media,
    reach,
    source_needs,
    synthetic_documents,
    synthetic_media,
)
from oxconsole.workload.prompts.promptdata import LengthStats, Prompt, PromptMedia, PromptStats, content_chars
from oxconsole.workload.prompts.sources import check_records, records
from oxconsole.workload.prompts.synthtext import synthetic_text as _synthetic_text
from oxconsole.workload.prompts.synthtext import warm_text as _warm_text
from oxconsole.workload.prompts.tokens import Counter, counter, exact_text
from oxconsole.workload.quality import line_expected
from oxconsole.workload.schema import SyntheticConfig, Workload


def _prompts_label(w: Workload) -> str:
    return printable(str(w.prompts.file) if w.prompts.file is not None else f"{w.path}: prompts")


_LineParts = tuple[str, str | None, str | None, int | None, Any, str | None, PromptMedia | None]
"""(id, tag, model, max_tokens, prompt string, messages list or a session's turns tuple, expected,
media)"""


def _line_turns(turns: Any, label: str, where: str) -> tuple[str, ...]:
    """A session's `"turns"`: a non-empty array of non-empty strings."""
    if type(turns) is not list or not turns:
        fail(label, f"{where}: turns", "a non-empty array of strings (the user's turns)", turns)
    for j, t in enumerate(turns):
        if type(t) is not str or not t:
            fail(label, f"{where}: turns.{j}", "a non-empty string", t)
    return tuple(turns)


def _line_body(obj: dict[str, Any], label: str, where: str) -> Any:
    """What a line sends: its "prompt" string, its "messages" array or its "turns", checked."""
    prompt = obj.get("prompt")
    messages = obj.get("messages")
    if "turns" in obj:
        if prompt is not None or messages is not None:
            raise error(label, where, 'only one of "prompt", "messages" or "turns"', "more than one")
        return _line_turns(obj["turns"], label, where)
    if prompt is not None:
        if messages is not None:
            raise error(label, where, 'only one of "prompt" or "messages"', "both")
        if type(prompt) is not str or not prompt:
            fail(label, f"{where}: prompt", "a non-empty string", prompt)
        return prompt
    if messages is not None:
        if type(messages) is not list or not messages:
            fail(label, f"{where}: messages", 'a non-empty array of {"role", "content"} objects', messages)
        for j, m in enumerate(messages):
            if type(m) is not dict or type(m.get("role")) is not str:
                fail(label, f"{where}: messages.{j}", 'an object with a "role" string and "content"', m)
            c = m.get("content")
            if c is not None and type(c) is not str and type(c) is not list:
                fail(label, f"{where}: messages.{j}.content", "a string or an array of content parts", c)
        return messages
    if any(k in obj for k in MEDIA_KEYS):  # a reranker's query, or images or audio alone
        query = obj.get("query")
        return query if type(query) is str else ""
    keys = ", ".join(f'"{k}"' for k in list(obj)[:6]) or "no keys"
    what = (
        'a JSON object with "prompt" or "messages" (or "turns": a multi-turn session; "query" and '
        '"documents" for a reranker; "audio" for a transcription)'
    )
    raise error(label, where, what, f"an object with {keys}")


def _parse_line(
    line: Line, lineno: int, label: str, models: frozenset[str], base: Path, check: bool = False
) -> _LineParts:
    """Validate one non-blank JSONL line; raise WorkloadError naming the line. `base`: the folder
    its media files are found from; `check`: data URLs decoded whole (the check before a run)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        detail = e.msg.split(":")[0] if e.msg else "invalid JSON"
        got = f"invalid JSON ({detail} at column {e.pos + 1})"
        raise WorkloadError(f"{label}: line {lineno}: expected a JSON object, got {got}") from None
    if type(obj) is not dict:
        fail(label, f"line {lineno}", 'a JSON object with "prompt" or "messages"', obj)
    where = f"line {lineno}"
    body = _line_body(obj, label, where)
    pid = obj.get("id")
    if pid is None:
        sid = str(lineno)
    elif type(pid) is str and pid:
        sid = pid
    elif type(pid) is int:
        sid = str(pid)
    else:
        fail(label, f"{where}: id", "a non-empty string or an integer", pid)
    tag = obj.get("tag")
    if tag is not None and (type(tag) is not str or not tag):
        fail(label, f"{where}: tag", "a non-empty string", tag)
    model = obj.get("model")
    if model is not None and (type(model) is not str or model not in models):
        if type(model) is not str:
            fail(label, f"{where}: model", "the name of a model in [[models]]", model)
        hint = did_you_mean(model, models)
        fail(
            label,
            f"{where}: model",
            "the name of a model in [[models]]" + (f' (did you mean "{hint}"?)' if hint else ""),
            model,
        )
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (type(max_tokens) is not int or max_tokens < 1):
        fail(label, f"{where}: max_tokens", "an integer >= 1", max_tokens)
    if max_tokens is not None and max_tokens > MAX_TOKENS:
        fail(
            label,
            f"{where}: max_tokens",
            f"an integer between 1 and {fmt_limit(MAX_TOKENS)} (tokens)",
            max_tokens,
        )
    media = line_media(obj, label, where, base, check)
    if media is not None and isinstance(body, tuple):
        keys = " and ".join(f'"{k}"' for k in MEDIA_KEYS if k in obj)
        raise error(label, where, 'no images or audio with "turns" (a session sends text)', keys)
    return sid, tag, model, max_tokens, body, line_expected(obj, label, where), media


READ_BUFFER = 4 << 20
"""The prompts file's read buffer. A line longer than the buffer is read a buffer at a time and
joined: with the default 8 KiB a 1 MB line (a 250,000-token prompt) cost 3-4 times what it does
with 4 MiB (about one copy), on the loop that times requests."""


def _file_lines(w: Workload) -> Iterator[tuple[int, Line]]:
    """(line number, line) for the non-blank lines of the prompts file, streamed."""
    path = w.prompts.file
    assert path is not None
    try:
        f = open(path, "rb", buffering=READ_BUFFER)  # noqa: SIM115 - closed by the with below; own errors
    except OSError as e:
        raise error(
            printable(str(w.path)), "prompts.file", "a readable file", f"{show(str(path))} ({e.strerror})"
        ) from None
    with f:
        for lineno, line in bounded_lines(f, _prompts_label(w)):
            if line.isspace():
                continue
            yield lineno, line


def _one_pass(w: Workload, suffix: str) -> Iterator[Prompt]:
    """One pass over the prompts; with `[prompts] tokenizer` each counted (synthetic ones cut) by it."""
    count = counter(w.prompts.tokenizer)
    if count is None or w.prompts.synthetic is not None:
        yield from _source_pass(w, suffix)
        return
    for p in _source_pass(w, suffix):
        yield dataclasses.replace(p, input_tokens=_prompt_tokens(count, p))


def _prompt_tokens(count: Counter, p: Prompt) -> int:
    """A prompt's input tokens: of each message's text, or of a Batch line's prompt / input."""
    if not p.messages and p.body is not None:
        value = p.body.get("prompt", p.body.get("input"))
        texts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        return sum(count(x) if isinstance(x, str) else len(x) if isinstance(x, list) else 1 for x in texts)
    total = 0
    for m in p.messages:
        c = m.get("content")
        if isinstance(c, str):
            total += count(c)
        elif isinstance(c, list):
            total += sum(
                count(x["text"]) for x in c if isinstance(x, dict) and isinstance(x.get("text"), str)
            )
    return total


def _source_pass(w: Workload, suffix: str) -> Iterator[Prompt]:
    pc = w.prompts
    if pc.file is not None and pc.format != "jsonl":
        for _, p in records(w, _prompts_label(w)):
            if p is not None:
                yield dataclasses.replace(p, id=p.id + suffix) if suffix else p
    elif pc.file is not None:
        label = _prompts_label(w)
        models = frozenset(m.name for m in w.models)
        base = pc.file.parent
        for lineno, line in _file_lines(w):
            sid, tag, model, max_tokens, body, expected, media = _parse_line(
                line, lineno, label, models, base
            )
            if isinstance(body, tuple):  # a session: its first turn, the rest sent by the engine
                first = [{"role": "user", "content": body[0]}]
                yield Prompt(sid + suffix, first, tag, model, max_tokens, len(body[0]), turns=body)
                continue
            if isinstance(body, str):
                messages: list[dict[str, Any]] = [{"role": "user", "content": body}]
                chars = len(body)
            else:
                messages = body
                chars = content_chars(messages)
            yield Prompt(
                sid + suffix, messages, tag, model, max_tokens, chars, expected=expected, media=media
            )
    elif pc.items is not None:
        for i, text in enumerate(pc.items):
            yield Prompt(f"item-{i}{suffix}", [{"role": "user", "content": text}], input_chars=len(text))
    elif pc.synthetic is not None:
        yield from _synthetic_pass(pc.synthetic, w.run.seed, suffix, pc.tokenizer)


def _synthetic_pass(
    syn: SyntheticConfig, seed: int, suffix: str, tokenizer: Path | None = None
) -> Iterator[Prompt]:
    """One pass of synthetic prompts: lengths drawn in order (the same each pass), the shared prefix
    first when there is one. With a tokenizer each is cut to exactly its tokens (prefix included)."""
    pre = syn.prefix_tokens
    prefix = ""
    if pre:
        prefix = (
            _synthetic_text(seed, "prefix", pre)
            if tokenizer is None
            else _exact(tokenizer, seed, "prefix", pre, "").rstrip()
        )
        prefix += " "
    ins = draws(syn.input_tokens, seed, "input")
    outs = draws(syn.output_tokens, seed, "output")
    for i in range(syn.count):
        n = next(ins)
        if tokenizer is None:
            text, tokens = prefix + _synthetic_text(seed, i, n), None
        else:
            text, tokens = _exact(tokenizer, seed, i, pre + n, prefix), pre + n
        pid = f"syn-{i}{suffix}"
        docs = synthetic_documents(syn, seed, i, n)
        yield Prompt(
            pid,
            [{"role": "user", "content": text}],
            max_tokens=next(outs),
            input_chars=len(text) + (sum(map(len, docs)) if docs else 0),
            input_tokens=tokens,
            media=synthetic_media(syn, seed, pid, docs),
        )


def _exact(tokenizer: Path, seed: int, index: int | str, n: int, prefix: str) -> str:
    """Synthetic text of exactly `n` tokens (the prefix's included) by the tokenizer."""
    guess = 2 * n
    while True:
        text = exact_text(tokenizer, prefix + _synthetic_text(seed, index, guess), n)
        if text is not None:
            return text
        guess *= 2


def _count_one_pass(w: Workload) -> int:
    pc = w.prompts
    if pc.items is not None:
        return len(pc.items)
    if pc.synthetic is not None:
        return pc.synthetic.count
    if pc.format != "jsonl":
        return sum(1 for _, p in records(w, _prompts_label(w)) if p is not None)
    return sum(1 for _ in _file_lines(w))


def iter_prompts(w: Workload) -> Iterator[Prompt]:
    """Stream the run's prompts: pass after pass (repeat), capped by run.requests, or cycling for duration.

    Ids are the plain prompt ids when only one pass is possible, otherwise `f"{id}#{pass}"`, pass from 1.
    The prompts file is read line by line, never whole.
    """
    run, pc = w.run, w.prompts
    total: int | None = None
    passes: int | None = None
    if run.requests > 0:
        total = run.requests
        multi = pc.repeat > 1 or run.requests > _count_one_pass(w)
    elif run.duration > 0:
        multi = True
    else:
        passes = pc.repeat
        multi = pc.repeat > 1
    emitted = 0
    n = 1
    while passes is None or n <= passes:
        got = 0
        for prompt in _one_pass(w, f"#{n}" if multi else ""):
            got += 1
            yield prompt
            emitted += 1
            if total is not None and emitted >= total:
                return
        if got == 0:
            raise error(_prompts_label(w), "", "at least one prompt", "an empty file")
        n += 1


def one_pass(w: Workload) -> Iterator[Prompt]:
    """One pass over the prompts with their own ids (no repeat suffix), streamed."""
    return _one_pass(w, "")


def turn_id(prompt_id: str, k: int) -> str:
    """The request id of a session's turn k (from 1): the prompt's id and `#tK`."""
    return f"{prompt_id}#t{k}"


def request_ids(p: Prompt) -> Iterator[str]:
    """The ids of the requests a prompt gives: its own, or each of a session's turns."""
    if p.turns is None:
        yield p.id
    else:
        for k in range(1, len(p.turns) + 1):
            yield turn_id(p.id, k)


def check_prompts(w: Workload) -> PromptStats:
    """Validate the whole prompt source before anything is sent; count prompts, tags and pinned models."""
    pc, run = w.prompts, w.run
    tags: frozenset[str] = frozenset()
    pinned: frozenset[str] = frozenset()
    lengths: tuple[LengthStats | None, LengthStats | None] = (None, None)
    skipped = sessions = turns = 0
    if pc.file is not None and pc.format != "jsonl":
        found = check_records(w, _prompts_label(w))
        count, skipped, pinned = found.count, found.skipped, found.models
        lengths = (found.input_lengths, found.output_lengths)
    elif pc.file is not None:
        count, tags, pinned, (sessions, turns) = _check_jsonl(w)
        if sessions and w.packing.size > 1:
            what = "1 (multi-turn sessions are sent a turn at a time, never packed)"
            raise error(
                printable(str(w.path)), "packing.size", what, f"{w.packing.size} with {sessions} sessions"
            )
    else:
        count = _count_one_pass(w)
        if pc.synthetic is not None:
            lengths = _synthetic_stats(pc.synthetic, run.seed)
            _warm_text(pc.synthetic)
    if pc.file is None or pc.format != "jsonl":
        source_needs(w, _prompts_label(w))
    if run.requests > 0:
        total: int | None = run.requests
    elif run.duration > 0:
        total = None
    else:
        total = (count - sessions + turns) * pc.repeat  # a session sends one request a turn
    return PromptStats(
        count=count,
        total_requests=total,
        tags=tags,
        models_referenced=pinned,
        input_lengths=lengths[0],
        output_lengths=lengths[1],
        skipped=skipped,
        sessions=sessions,
        turns=turns,
    )


def _check_jsonl(w: Workload) -> tuple[int, frozenset[str], frozenset[str], tuple[int, int]]:
    """Every line of a JSONL prompts file checked: (prompts, tags, models pinned by lines,
    (sessions, their turns))."""
    tags: set[str] = set()
    pinned: set[str] = set()
    label = _prompts_label(w)
    models = frozenset(m.name for m in w.models)
    assert w.prompts.file is not None
    base = w.prompts.file.parent
    apis = reach(w)
    # Ids are checked for uniqueness by their 64-bit hashes (8 bytes a line, not a set of
    # strings); the few lines whose hashes repeat are then compared by their ids.
    keys = array("q")
    key = keys.append
    count = sessions = turns = 0
    problems: list[str] = []
    bad = 0
    for lineno, line in _file_lines(w):
        try:
            sid, tag, model, _, body, _, media = _parse_line(line, lineno, label, models, base, check=True)
            has_text = bool(body.strip()) if isinstance(body, str) else content_chars(body) > 0
            check_needs(apis(tag, model), media, has_text, label, f"line {lineno}")
        except WorkloadError as e:  # every bad line is told (up to a screenful), not only the first
            bad += 1
            if len(problems) < MAX_LINE_ERRORS:
                problems.extend(e.errors)
            continue
        count += 1
        if isinstance(body, tuple):
            sessions += 1
            turns += len(body)
        if tag is not None:
            tags.add(tag)
        if model is not None:
            pinned.add(model)
        key(hash(sid))
    if count == 0 and not bad:
        raise error(label, "", "at least one prompt (one JSON object a line)", "an empty file")
    problems += _repeated_ids(w, keys, label, models)
    if problems:
        if bad > MAX_LINE_ERRORS:
            problems.append(f"{label}: ... and {bad - MAX_LINE_ERRORS} more bad lines")
        raise WorkloadError(*problems)
    return count, frozenset(tags), frozenset(pinned), (sessions, turns)


def _synthetic_stats(syn: SyntheticConfig, seed: int) -> tuple[LengthStats | None, LengthStats | None]:
    """The drawn lengths of the first SAMPLE_MAX prompts (prefix included), for distributions only."""
    n = min(syn.count, SAMPLE_MAX)
    stats: list[LengthStats | None] = []
    for spec, which, extra in (
        (syn.input_tokens, "input", syn.prefix_tokens),
        (syn.output_tokens, "output", 0),
    ):
        if isinstance(spec, int):
            stats.append(None)
        else:
            stats.append(length_stats(extra + x for x in itertools.islice(draws(spec, seed, which), n)))
    return stats[0], stats[1]


def _repeated_ids(w: Workload, keys: array[int], label: str, models: frozenset[str]) -> list[str]:
    """Each line whose id an earlier line has (only lines whose hash repeats are looked at again,
    by their ids; lines that do not parse were told already)."""
    twice = repeated(keys)
    if not twice:
        return []
    assert w.prompts.file is not None
    base = w.prompts.file.parent
    first: dict[str, int] = {}
    found: list[str] = []
    for lineno, line in _file_lines(w):
        try:
            sid = _parse_line(line, lineno, label, models, base)[0]
        except WorkloadError:
            continue
        if hash(sid) not in twice:
            continue
        if sid in first:
            if len(found) < MAX_LINE_ERRORS:
                what = f"a unique id (line {first[sid]} has the same id)"
                found.append(str(error(label, f"line {lineno}: id", what, show(sid))))
            continue
        first[sid] = lineno
    return found
