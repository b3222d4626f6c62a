"""OpenAI Batch API input files (`[prompts] format = "openai-batch"`): each line one request, run live.

Why this module exists: teams keep their batch jobs as Batch API input files
(`{"custom_id", "method", "url", "body"}` a line). Running one as a workload sends each body as
given, to the model its `model` names in `[[models]]`, with `custom_id` as the request id, so
the same file measures an endpoint live and, with `[output] batch_output`, gives the Batch
output file back. Each line is checked on its own and a bad one is named with what is wrong.
A line's `url` says which API it is for (`/v1/chat/completions`, `/v1/completions`,
`/v1/embeddings`); the model its body names must be called on that API (`[[models]] api`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from oxconsole.workload.problems import WorkloadError, did_you_mean, fail, json_object
from oxconsole.workload.prompts.boundedlines import Line, bounded_lines
from oxconsole.workload.prompts.promptdata import Prompt, content_chars

URLS = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
    "/v1/responses": "responses",
}
"""The Batch API urls a line may name, and the `[[models]] api` each is called on."""
_TEXT_KEYS = {"completions": "prompt", "embeddings": "input"}
"""The body field carrying the text of a completions or embeddings line."""


def parse_batch_line(line: Line, where: str, label: str, models: Mapping[str, str]) -> Prompt:
    """One Batch input line as a prompt carrying its body; WorkloadError naming the line otherwise.
    `models`: each model's name -> its api."""
    obj = json_object(line, label, where, 'a JSON object with "custom_id", "method", "url" and "body"')
    cid = obj.get("custom_id")
    if type(cid) is not str or not cid:
        fail(label, f"{where}: custom_id", "a non-empty string", cid)
    if obj.get("method") != "POST":
        fail(label, f"{where}: method", '"POST"', obj.get("method"))
    url = obj.get("url")
    if url not in URLS:
        fail(label, f"{where}: url", " | ".join(f'"{u}"' for u in URLS), url)
    body = obj.get("body")
    if type(body) is not dict:
        fail(label, f"{where}: body", "a JSON object (the request body)", body)
    model = body.get("model")
    if type(model) is not str or model not in models:
        hint = did_you_mean(model, models) if type(model) is str else None
        what = "the name of a model in [[models]]" + (f' (did you mean "{hint}"?)' if hint else "")
        fail(label, f"{where}: body.model", what, model)
    api = URLS[url]
    if models[model] != api:
        fail(
            label,
            f"{where}: url",
            f'"{_url_of(models[model])}" (model {model} has api = "{models[model]}")',
            url,
        )
    if api == "responses":
        return _response_line(cid, body, model, label, where)
    if api != "chat":
        return _text_line(cid, body, model, api, label, where)
    messages = body.get("messages")
    if type(messages) is not list or not messages or any(type(m) is not dict for m in messages):
        fail(label, f"{where}: body.messages", 'a non-empty array of {"role", "content"} objects', messages)
    cap = body.get("max_completion_tokens", body.get("max_tokens"))
    max_tokens = cap if type(cap) is int and cap > 0 else None
    return Prompt(
        cid,
        messages,
        model=model,
        max_tokens=max_tokens,
        input_chars=content_chars(messages),
        body=body,
    )


def _url_of(api: str) -> str:
    return next(u for u, a in URLS.items() if a == api)


def _text_chars(value: Any) -> int | None:
    """Characters of a `prompt` / `input` (a string or a list of strings; token ids count 4 a
    token, as estimates do); None when it is none of those."""
    if isinstance(value, str):
        return len(value) if value else None
    if not isinstance(value, list) or not value:
        return None
    if all(type(t) is int for t in value):
        return 4 * len(value)
    if all(isinstance(x, str) and x for x in value):
        return sum(len(x) for x in value)
    if all(isinstance(x, list) and x and all(type(t) is int for t in x) for x in value):
        return 4 * sum(len(x) for x in value)
    return None


def _text_line(cid: str, body: dict[str, Any], model: str, api: str, label: str, where: str) -> Prompt:
    """A `/v1/completions` or `/v1/embeddings` line: its `prompt` or `input` checked."""
    key = _TEXT_KEYS[api]
    chars = _text_chars(body.get(key))
    if chars is None:
        what = "a non-empty string, an array of strings or of token ids"
        fail(label, f"{where}: body.{key}", what, body.get(key))
    cap = body.get("max_tokens") if api == "completions" else None
    return Prompt(
        cid,
        [],
        model=model,
        max_tokens=cap if type(cap) is int and cap > 0 else None,
        input_chars=chars or 0,
        body=body,
    )


def _response_line(cid: str, body: dict[str, Any], model: str, label: str, where: str) -> Prompt:
    """A `/v1/responses` line: its `input` a non-empty string or array of input items."""
    value = body.get("input")
    if isinstance(value, str) and value:
        chars = len(value)
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        chars = content_chars(value)
    else:
        fail(label, f"{where}: body.input", "a non-empty string or array of input items", value)
    instructions = body.get("instructions")
    chars += len(instructions) if isinstance(instructions, str) else 0
    cap = body.get("max_output_tokens")
    return Prompt(
        cid,
        [],
        model=model,
        max_tokens=cap if type(cap) is int and cap > 0 else None,
        input_chars=chars,
        body=body,
    )


def batch_prompts(
    path: Path, label: str, models: Mapping[str, str], bad: list[WorkloadError] | None = None
) -> Iterator[tuple[str, Prompt]]:
    """(where, prompt) for every non-blank line of the file, streamed. The first bad line raises;
    with `bad` given (a check of the whole file), each bad line is added there and passed over,
    so that every one can be told at once."""
    with open(path, "rb") as f:
        for lineno, line in bounded_lines(f, label, bad=bad):
            if not line.isspace():
                where = f"line {lineno}"
                try:
                    prompt = parse_batch_line(line, where, label, models)
                except WorkloadError as e:
                    if bad is None:
                        raise
                    bad.append(e)
                    continue
                yield where, prompt
