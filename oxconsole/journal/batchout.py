"""The OpenAI Batch API output file (and its errors file), written from a run's journal.

Why this module exists: a team that ran its Batch input file live (`format = "openai-batch"`)
wants the file the Batch API would have given back, to feed the same downstream code. The
journal holds what each request came to (text, token counts, error), so the output is built from
it after the run: one line per request, in journal order, successes in `batch_output` and
failures in the errors file next to it, as the Batch API splits them. The journal is read twice,
line by line (the second time only to write), so a million requests take no more memory than
the few ids journaled more than once (`--resume` re-runs). Each answer's body is shaped as its
model's API answers (`[[models]] api`): a chat completion, a text completion, a Responses
API response, or embeddings (the
vectors the journal's `text` holds when `save_text` is on, else none).
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from oxconsole.base.idset import repeated


def errors_path(output: Path) -> Path:
    """Where failures go: `output.jsonl` -> `output.errors.jsonl`."""
    return output.with_name(f"{output.stem}.errors{output.suffix or '.jsonl'}")


def _records(journal: Path) -> Iterator[dict[str, Any]]:
    with open(journal, "rb") as f:
        for line in f:
            if line.strip():
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a line cut by a crash: the journal's reader skips it too
                if isinstance(rec, dict) and isinstance(rec.get("id"), str):
                    yield rec


def _short_hash(*parts: str) -> str:
    return hashlib.blake2b("\x00".join(parts).encode(), digest_size=12).hexdigest()


def _answer(rec: dict[str, Any], run: str, api: str) -> dict[str, Any]:
    """The response body of an answered request, as its API shapes it."""
    rid = rec["id"]
    pt, ct = int(rec.get("input_tokens") or 0), int(rec.get("output_tokens") or 0)
    if api == "embeddings":
        try:
            vectors = orjson.loads(rec["text"]) if isinstance(rec.get("text"), str) else [None]
        except orjson.JSONDecodeError:
            vectors = [None]
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
            "model": rec.get("model"),
            "usage": {"prompt_tokens": pt, "total_tokens": pt},
        }
    if api == "responses":
        return _response(rec, run, pt, ct)
    if api == "completions":
        choice: dict[str, Any] = {
            "index": 0,
            "text": rec.get("text"),
            "logprobs": None,
            "finish_reason": None,
        }
        head = {"id": f"cmpl-{_short_hash(run, rid, 'completion')}", "object": "text_completion"}
    else:
        message = {"role": "assistant", "content": rec.get("text")}
        choice = {"index": 0, "message": message, "finish_reason": None}
        head = {"id": f"chatcmpl-{_short_hash(run, rid, 'completion')}", "object": "chat.completion"}
    return {
        **head,
        "created": int(rec.get("t_sent") or 0),
        "model": rec.get("model"),
        "choices": [choice],
        "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct, **_details(rec)},
    }


def _details(rec: dict[str, Any], names: tuple[str, str] = ("prompt", "completion")) -> dict[str, Any]:
    """Usage's details, as the server gave them (the record's cached and reasoning tokens)."""
    out: dict[str, Any] = {}
    if type(rec.get("cached_tokens")) is int:
        out[names[0] + "_tokens_details"] = {"cached_tokens": rec["cached_tokens"]}
    if type(rec.get("reasoning_tokens")) is int:
        out[names[1] + "_tokens_details"] = {"reasoning_tokens": rec["reasoning_tokens"]}
    return out


def _response(rec: dict[str, Any], run: str, it: int, ot: int) -> dict[str, Any]:
    """A Responses API answer: one message item holding the text, and usage in its own words."""
    rid = rec["id"]
    text: dict[str, Any] = {"type": "output_text", "text": rec.get("text"), "annotations": []}
    item = {
        "type": "message",
        "id": f"msg_{_short_hash(run, rid, 'message')}",
        "role": "assistant",
        "status": "completed",
        "content": [text],
    }
    usage = {"input_tokens": it, "output_tokens": ot, "total_tokens": it + ot}
    return {
        "id": f"resp_{_short_hash(run, rid, 'response')}",
        "object": "response",
        "created_at": int(rec.get("t_sent") or 0),
        "status": "completed",
        "model": rec.get("model"),
        "output": [item],
        "usage": {**usage, **_details(rec, ("input", "output"))},
    }


def batch_line(rec: dict[str, Any], run: str, api: str = "chat") -> tuple[bool, bytes]:
    """(ok, the Batch output line) for one journal record of a model called on `api`."""
    rid = rec["id"]
    line: dict[str, Any] = {"id": f"batch_req_{_short_hash(run, rid)}", "custom_id": rid}
    request_id = f"req_{_short_hash(run, rid, 'request')}"
    err = rec.get("error")
    if rec.get("status") == "ok":
        body = _answer(rec, run, api)
        line["response"] = {"status_code": 200, "request_id": request_id, "body": body}
        line["error"] = None
        return True, orjson.dumps(line) + b"\n"
    detail = rec.get("error_detail") or err or "failed"
    if isinstance(err, str) and err.startswith("http_") and err[5:].isdigit():
        error_body = {"error": {"message": detail, "type": None, "param": None, "code": None}}
        line["response"] = {"status_code": int(err[5:]), "request_id": request_id, "body": error_body}
        line["error"] = None
    else:
        line["response"] = None
        line["error"] = {"code": err or "error", "message": detail}
    return False, orjson.dumps(line) + b"\n"


def write_batch_output(
    journal: Path, output: Path, run: str, apis: Mapping[str, str] | None = None
) -> tuple[int, int]:
    """Write the Batch output and errors files from `journal`: (successes, failures) written.

    A request journaled more than once (re-run by `--resume`) is written once, as its last record
    says. `run` (the workload name) seeds the `batch_req_` and `req_` ids, so they are stable.
    `apis`: each model's `api` (a model not in it is "chat").
    """
    apis = apis or {}
    keys = array("q", (hash(r["id"]) for r in _records(journal)))
    twice = repeated(keys)
    last: dict[str, int] = {}
    if twice:
        for i, r in enumerate(_records(journal)):
            if hash(r["id"]) in twice:
                last[r["id"]] = i
    output.parent.mkdir(parents=True, exist_ok=True)
    failed = errors_path(output)
    n_ok = n_err = 0
    with _private(output.with_name(output.name + ".tmp")) as good, _private(failed) as bad:
        for i, rec in enumerate(_records(journal)):
            if last and last.get(rec["id"], i) != i:
                continue
            ok, data = batch_line(rec, run, apis.get(str(rec.get("model")), "chat"))
            (good if ok else bad).write(data)
            n_ok += ok
            n_err += not ok
    os.replace(output.with_name(output.name + ".tmp"), output)
    return n_ok, n_err


def _private(path: Path) -> BinaryIO:
    """`path` opened to be written whole, owner-only like the journal it is made from (its
    prompts and answers are no more public there than in the journal)."""
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
