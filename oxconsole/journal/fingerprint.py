"""The run manifest beside a journal: what `--resume` checks before it trusts the journal's ids.

Why this module exists: `--resume` skips ids already `ok`. That is only right while an id still
names the same prompt. Ids come from the prompt source (explicit `id`s, line numbers, item or
synthetic indexes), `repeat`, `requests` and duration cycling, and synthetic prompts from the seed.
The manifest (`<results>.meta.json`) records those inputs when a run starts; a resume whose
workload changed them in a way that changes what an id means is refused (exit 2) instead of
silently mixing two different runs in one journal.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import orjson

from oxconsole.base.idset import IdSet
from oxconsole.journal.journal import Journal
from oxconsole.journal.manifest import SETTLE_KEY, manifest_path, read_manifest, write_manifest_data
from oxconsole.workload import Workload, WorkloadError, iter_prompts, plans_to_toml, request_ids

VERSION = 1


def fingerprint(w: Workload) -> dict[str, Any]:
    """The inputs that decide which prompt each id names (no prompt text is stored), in the form
    they have once written as JSON and read back: lists, not tuples; dicts, not dataclasses. A
    fresh fingerprint is compared with the stored one, so both must have the same form or a resume
    with nothing changed would be refused."""
    fp = orjson.loads(orjson.dumps(_fingerprint(w), default=_plain))
    assert isinstance(fp, dict)
    return fp


def _plain(value: object) -> object:
    """What orjson does not write itself: paths, frozen sets (sorted, so the order is stable)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    raise TypeError(f"not in a fingerprint: {type(value).__name__}")


def _fingerprint(w: Workload) -> dict[str, Any]:
    pc, run = w.prompts, w.run
    fp: dict[str, Any] = {
        "version": VERSION,
        "repeat": pc.repeat,
        "requests": run.requests,
        "cycling": run.requests == 0 and run.duration > 0,
    }
    if pc.file is not None:
        h = hashlib.sha256()
        explicit = True
        with open(pc.file, "rb") as f:
            for line in f:
                h.update(line)
                if explicit and line.strip() and b'"id"' not in line:
                    explicit = False
        fp["source"] = "file"
        fp["format"] = pc.format
        fp["file_sha256"] = h.hexdigest()
        fp["explicit_ids"] = explicit
    elif pc.items is not None:
        fp["source"] = "items"
        fp["items_sha256"] = hashlib.sha256(orjson.dumps(list(pc.items))).hexdigest()
    else:
        assert pc.synthetic is not None
        s = pc.synthetic
        fp["source"] = "synthetic"
        fp["synthetic"] = {
            "count": s.count,
            "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens,
            "prefix_tokens": s.prefix_tokens,
        }
        fp["seed"] = run.seed
        if pc.tokenizer is not None:  # the text is cut to lengths by it
            fp["tokenizer_sha256"] = _sha256(pc.tokenizer)
    return fp


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


KEPT = ("sessions", "trials")
"""Keys other modules record in the manifest about the journal's content (`sessions.py`,
`trialstate.py`): kept when the manifest is written again while the journal has records, dropped
with a new journal."""


def write_manifest(w: Workload, results: Path, fp: dict[str, Any] | None = None) -> None:
    data: dict[str, Any] = {"name": w.name, "workload": str(w.path), "prompts": fp or fingerprint(w)}
    if w.slo is not None:
        data["slo"] = w.slo.to_dict()
    data[SETTLE_KEY] = w.run.settle_tolerance  # `oxconsole report` judges settledness with it again
    if results.exists() and results.stat().st_size > 0:
        old = read_manifest(results)
        data.update((k, old[k]) for k in KEPT if k in old)
    if w.plans:
        data["plans"] = plans_to_toml(w.plans)  # `oxconsole report` prices the journal under them
    write_manifest_data(results, data)


def record_plans(w: Workload, results: Path) -> None:
    """A resumed run's plans replace those in its manifest: the whole journal's summary, and
    `oxconsole report` after it, price it under the plans of its last session."""
    data = read_manifest(results)
    if data.get("plans") == (plans_to_toml(w.plans) if w.plans else None):
        return
    data.pop("plans", None)
    if w.plans:
        data["plans"] = plans_to_toml(w.plans)
    write_manifest_data(results, data)


def keep_slo(w: Workload, results: Path) -> None:
    """The manifest keeps the `[slo]` of the latest session (`report` takes its target from it)."""
    data = read_manifest(results)
    want = None if w.slo is None else w.slo.to_dict()
    if data.get("slo") == want:
        return
    if want is None:
        data.pop("slo", None)
    else:
        data["slo"] = want
    write_manifest_data(results, data)


def _base(i: str) -> str:
    head, sep, tail = i.rpartition("#")
    if sep and tail[:1] == "t" and tail[1:].isdigit():  # a session's turn: "ID#n#tK" -> "ID#tK"
        return _base(head) + sep + tail
    return head if sep and tail.isdigit() else i


def check_resume(w: Workload, results: Path, done_ids: Iterable[str]) -> list[str]:
    """Refuse (WorkloadError) a resume whose workload changed what the journal's ids mean.

    Returns notes for the user (e.g. the prompts file grew but its explicit ids still match).
    """
    label = f"{results}: --resume"
    notes: list[str] = []
    now = fingerprint(w)
    mpath = manifest_path(results)
    then: dict[str, Any] | None = None
    if mpath.exists():
        try:
            then = orjson.loads(mpath.read_bytes()).get("prompts")
        except (orjson.JSONDecodeError, AttributeError):
            then = None
    if then is None:
        notes.append(
            f"{mpath.name} is missing: could only check that the journal's ids exist in the workload"
        )
    else:
        notes.extend(_compare_fingerprints(then, now, label))
    _check_ids_exist(w, done_ids, now["cycling"], label)
    return notes


def _compare_fingerprints(then: dict[str, Any], now: dict[str, Any], label: str) -> list[str]:
    """Refuse a workload whose prompt fingerprint differs from the manifest's; notes otherwise."""
    notes: list[str] = []

    def refuse(what: str) -> None:
        raise WorkloadError(
            f"{label}: expected the workload the journal was written with, but {what}; the journal's "
            "ids would name other prompts. Start a new run without --resume (the journal is kept "
            "aside), or restore the original settings."
        )

    if then.get("source") != now["source"]:
        refuse(f"the prompt source changed from {then.get('source')} to {now['source']}")
    for key in ("repeat", "requests", "cycling"):
        if then.get(key) != now[key]:
            where = "prompts.repeat" if key == "repeat" else f"run.{'duration' if key == 'cycling' else key}"
            refuse(f"{where} changed ({then.get(key)} -> {now[key]})")
    if now["source"] == "synthetic":
        # a manifest written before prefix_tokens was recorded had none
        then_syn = {"prefix_tokens": 0, **(then.get("synthetic") or {})}
        if then_syn != now["synthetic"] or then.get("seed") != now["seed"]:
            refuse("prompts.synthetic or run.seed changed (synthetic prompts would differ)")
        if then.get("tokenizer_sha256") != now.get("tokenizer_sha256"):
            refuse("prompts.tokenizer changed (synthetic prompts are cut to lengths by it)")
    if now["source"] == "file" and then.get("format", now["format"]) != now["format"]:
        refuse(f"prompts.format changed ({then.get('format')} -> {now['format']})")
    if now["source"] == "items" and then.get("items_sha256") != now["items_sha256"]:
        refuse("prompts.items changed")
    if now["source"] == "file" and then.get("file_sha256") != now["file_sha256"]:
        if not (now["explicit_ids"] and then.get("explicit_ids")):
            refuse("the prompts file changed and its prompts have no explicit ids (ids are line numbers)")
        notes.append("the prompts file changed; its explicit ids are kept, new ids will be sent")
    return notes


def _check_ids_exist(w: Workload, done_ids: Iterable[str], cycling: bool, label: str) -> None:
    """Refuse a resume when some of the journal's ids name no prompt of this workload.

    Streamed: the journal's ids are read once, the workload's held as 8-byte hashes (IdSet), so a
    resume of a million-line journal does not hold a million strings twice.
    """
    done = iter(done_ids)
    first = next(done, None)
    if first is None:
        return

    def current_ids() -> Iterator[str]:
        for p in iter_prompts(w):
            if cycling and not p.id.endswith("#1"):
                break  # one pass of base ids is all a cycling run has
            for rid in request_ids(p):
                yield _base(rid) if cycling else rid

    current = IdSet(current_ids())
    missing = 0
    examples: list[str] = []
    for i in itertools.chain((first,), done):
        if (_base(i) if cycling else i) not in current:
            missing += 1
            if len(examples) < 3:
                examples.append(i)
    if missing:
        raise WorkloadError(
            f"{label}: expected the journal's ids to name prompts of this workload, but "
            f"{missing} do not (e.g. {sorted(examples)}); the workload changed in a way that "
            "changes ids. Start a new run without --resume, or restore the original workload."
        )


def open_journal(
    w: Workload,
    results: Path,
    done_ids: AbstractSet[str],
    on_failure: Callable[[str], None] | None = None,
) -> tuple[Journal, list[str]]:
    """Open a run's journal for appending: on resume (`done_ids` not empty) after checking that
    its ids still mean the same prompts, else after recording what they mean. Returns notes.
    `on_failure` is told once when a write or fsync fails (see `Journal`)."""
    notes: list[str] = []
    if len(done_ids):
        notes = check_resume(w, results, done_ids)
        if not manifest_path(results).exists():
            write_manifest(w, results)
        keep_slo(w, results)
        record_plans(w, results)
    else:
        write_manifest(w, results)
    return Journal(results, on_failure), notes
