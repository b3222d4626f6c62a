"""How each model's request body is built, and how it changes when a server rejects a field.

Why this module exists: servers disagree on which optional fields they take (`max_tokens` or
`max_completion_tokens`, `temperature` for reasoning models, `stream_options`). Rather than fail a
whole run on an HTTP 400, the engine sends the rejected field differently for the rest of the run
and says so once; this module holds that decision and the per-model state it keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from oxconsole.engine.send.apis import response_input, streams, text_body
from oxconsole.engine.send.attempt import AttemptResult, Encoded
from oxconsole.engine.send.mediabodies import MediaBodies
from oxconsole.workload import ModelConfig, Prompt

_MEDIA = frozenset(("rerank", "transcriptions", "speech", "images"))

_ADAPTABLE = ("max_tokens", "max_completion_tokens", "temperature", "stream_options")
_REJECTED = (
    "unsupported",
    "not supported",
    "unrecognized",
    "unknown",
    "not allowed",
    "extra inputs",
    "not permitted",
)


def rejected_field(res: AttemptResult, body: dict[str, Any]) -> str | None:
    """The field of `body` an HTTP 400 rejects, among those the engine may send differently.

    OpenAI names it in `error.param` ("Unsupported parameter: 'max_tokens' is not supported with
    this model. Use 'max_completion_tokens' instead."); other servers only in the message
    ("Unrecognized request argument supplied: stream_options", pydantic's "Extra inputs are not
    permitted"), so a message saying a field of the body is not supported counts too.
    """
    if res.param in _ADAPTABLE and res.param in body:
        return res.param
    text = (res.detail or "").lower()
    if not any(w in text for w in _REJECTED):
        return None
    for key in _ADAPTABLE:
        if key in body and re.search(rf"(?<![a-z_]){key}(?![a-z_])", text):
            return key
    return None


class GivenBody(dict[str, Any]):
    """A body sent as the prompt gave it: of its fields only `stream_options` (which the engine
    added) may be dropped on a 400; the others are the user's, and a 400 on them stands."""


@dataclass(slots=True)
class SendAs:
    """How one model's requests are sent (changed when its server rejects a field)."""

    max_key: str
    temperature: bool = True
    stream_options: bool = True
    max_switched: bool = False


class Bodies:
    """Request bodies for a run's models, sent as each model's server last accepted them."""

    def __init__(self, models: Iterable[ModelConfig], *, stream: bool, warnings: list[str]) -> None:
        self.stream = stream
        self.warnings = warnings
        """The run's warnings: a field found rejected is announced here once."""
        self._send_as = {m.name: SendAs(m.max_tokens_param) for m in models}
        self.media = MediaBodies()
        """Images, audio and the bodies of the other kinds (`mediabodies.py`)."""

    def body(self, prompt: Prompt, m: ModelConfig) -> dict[str, Any] | Encoded:
        if prompt.body is not None:
            return self.given(prompt.body, m)
        api = m.api
        if api in _MEDIA:
            return self._media_body(prompt, m)
        send = self._send_as[m.name]
        if api == "responses":
            return self._response_body(prompt, m)
        if api != "chat":
            body = text_body(m, prompt.messages)
            if m.api == "embeddings":
                body.update(m.extra_body)
                return body
        else:
            messages = prompt.messages if prompt.media is None else self.media.messages(prompt)
            body = {"model": m.name, "messages": messages}
        if self.stream:
            body["stream"] = True
            if send.stream_options:
                body["stream_options"] = {"include_usage": True}
        else:
            body["stream"] = False
        max_tokens = prompt.max_tokens if prompt.max_tokens is not None else m.max_tokens
        if max_tokens is not None:
            body[send.max_key] = max_tokens
        if m.temperature is not None and send.temperature:
            body["temperature"] = m.temperature
        if m.ignore_eos:
            body["ignore_eos"] = True
        if m.extra_body:
            body.update(m.extra_body)
        return body

    def _response_body(self, prompt: Prompt, m: ModelConfig) -> dict[str, Any]:
        """A Responses API body: the messages as `input`, the cap as `max_output_tokens` (the
        API's only name for it), no `stream_options` (usage always comes with the last event)."""
        messages = prompt.messages if prompt.media is None else self.media.messages(prompt)
        body: dict[str, Any] = {
            "model": m.name,
            "input": response_input(messages),
            "stream": self.stream,
        }
        max_tokens = prompt.max_tokens if prompt.max_tokens is not None else m.max_tokens
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
        if m.temperature is not None and self._send_as[m.name].temperature:
            body["temperature"] = m.temperature
        if m.extra_body:
            body.update(m.extra_body)
        return body

    def _media_body(self, prompt: Prompt, m: ModelConfig) -> dict[str, Any] | Encoded:
        media, api = self.media, m.api
        if api == "transcriptions":
            return media.transcription(m, prompt, streams(api, self.stream))
        if api == "rerank":
            return media.rerank(m, prompt)
        if api == "speech":
            return media.speech(m, prompt)
        return media.images(m, prompt)

    def given(self, given: dict[str, Any], m: ModelConfig) -> dict[str, Any]:
        """A body as the prompt gives it (an OpenAI Batch line's): only `model` set to the model's
        name and `stream` (with `stream_options` when streaming) set by the run, so TTFT is
        measured; every other field as given, nothing of the model's settings added."""
        body = GivenBody(given)
        body["model"] = m.name
        if m.api == "embeddings":
            return body
        body["stream"] = self.stream
        if m.api == "responses":
            body.pop("stream_options", None)
        elif self.stream and self._send_as[m.name].stream_options:
            body["stream_options"] = {"include_usage": True}
        else:
            body.pop("stream_options", None)
        return body

    def adapt(self, model: str, res: AttemptResult, body: dict[str, Any]) -> bool:
        """After an HTTP 400 naming a key this engine chose to send: send it differently from now
        on (max_tokens <-> max_completion_tokens once, temperature or stream_options dropped), with
        a warning the first time. True when the request should go again with a new body."""
        key = rejected_field(res, body)
        if key is None or (isinstance(body, GivenBody) and key != "stream_options"):
            return False
        send = self._send_as[model]
        note = ""
        if key in ("max_tokens", "max_completion_tokens"):
            if send.max_key == key:
                if send.max_switched:
                    return False  # both rejected: a real error
                send.max_key = "max_completion_tokens" if key == "max_tokens" else "max_tokens"
                send.max_switched = True
                note = f"sending the cap as {send.max_key} instead"
        elif key == "temperature":
            if send.temperature:
                send.temperature = False
                note = "sending no temperature (the model's default) instead"
        elif send.stream_options:
            send.stream_options = False
            note = "sending no stream_options: token counts may be estimated"
        if note:
            self.warnings.append(
                f"model {model}: the server rejected {key} ({res.detail or 'HTTP 400'}); {note} "
                "for the rest of the run"
            )
        return True
