"""A transcription request's multipart/form-data body, built as bytes: the fields once per model,
the file per request, joined with one copy.

Why this module exists: `/audio/transcriptions` takes a form (`file`, `model`, `response_format`,
...), not JSON. The engine sends a prebuilt body (`EndpointClient.attempt` posts bytes), so the
form is bytes too: everything but the file is the same for every request to one model, made once
(`FormTemplate`), and a request's body is that prefix, the file and the closing boundary. aiohttp's
`FormData` builds the same body through a `MultipartWriter` and payload objects per request, in
an async write, and cannot be built before the clock as bytes.

RFC 7578: each part has `Content-Disposition: form-data; name="..."`, the file part a `filename`
and its `Content-Type`; the boundary must not occur in any part. The boundary here is 32 random
hex digits made per template, so a file containing it is a 2**-128 event; `body` checks anyway
when asked (`check=True`: a `bytes.find`, ~150 us per MB; a file read from a prompts line
needs checking once, when it is read, not per request).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping


def _quote(value: str) -> str:
    """A name or filename inside a quoted header parameter, as browsers and httpx write it: `"`,
    CR and LF percent-encoded (a filename is a file's name only, never its path)."""
    return value.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


class FormTemplate:
    """The form for one model: its text fields (in order), then one file part, whose name and
    type may differ per request (a prompts line's own file).

    `content_type` goes in the request's Content-Type header (it carries the boundary)."""

    __slots__ = (
        "_fields",
        "_file",
        "_file_field",
        "_tail",
        "boundary",
        "content_type",
        "file_type",
        "filename",
    )

    def __init__(
        self,
        fields: Mapping[str, str],
        *,
        file_field: str = "file",
        filename: str = "audio.wav",
        file_type: str = "audio/wav",
        boundary: str | None = None,
    ) -> None:
        self.boundary = boundary or secrets.token_hex(16)
        b = self.boundary
        self._fields = "".join(
            f'--{b}\r\nContent-Disposition: form-data; name="{_quote(k)}"\r\n\r\n{v}\r\n'
            for k, v in fields.items()
        ).encode("utf-8")
        self._file_field = file_field
        self.filename = filename
        self.file_type = file_type
        self._file = self._file_head(filename, file_type)
        self._tail = f"\r\n--{b}--\r\n".encode("ascii")
        self.content_type = f"multipart/form-data; boundary={b}"

    def _file_head(self, filename: str, file_type: str) -> bytes:
        return (
            f'--{self.boundary}\r\nContent-Disposition: form-data; name="{_quote(self._file_field)}"; '
            f'filename="{_quote(filename)}"\r\nContent-Type: {file_type}\r\n\r\n'
        ).encode()

    def body(
        self,
        *file_parts: bytes,
        filename: str | None = None,
        file_type: str | None = None,
        check: bool = False,
    ) -> bytes:
        """The whole body with the file made of `file_parts` (joined, not copied first), named
        `filename` and typed `file_type` (the template's own when not given)."""
        if check:
            marker = self.boundary.encode("ascii")
            for part in file_parts:
                if marker in part:
                    raise ValueError("the file contains the form's boundary: make a new FormTemplate")
        head = self._file
        if (filename is not None and filename != self.filename) or (
            file_type is not None and file_type != self.file_type
        ):
            head = self._file_head(filename or self.filename, file_type or self.file_type)
        return b"".join((self._fields, head, *file_parts, self._tail))

    def size(self, file_size: int) -> int:
        """The body's length for a file of `file_size` bytes (with the template's file name)."""
        return len(self._fields) + len(self._file) + file_size + len(self._tail)


def transcription_form(
    model: str,
    *,
    response_format: str = "json",
    filename: str = "audio.wav",
    file_type: str = "audio/wav",
    extra: Mapping[str, str] | None = None,
) -> FormTemplate:
    """The `/audio/transcriptions` form: `model`, `response_format` and any `extra` text fields
    (`language`, `temperature`, `stream`, ...: a form's values are strings), then `file`."""
    fields = {"model": model, "response_format": response_format, **(extra or {})}
    return FormTemplate(fields, filename=filename, file_type=file_type)


class FormPart:
    """One part of a form read back: its name, filename (None for a text field), content type
    (None when the part names none) and bytes."""

    __slots__ = ("content_type", "data", "filename", "name")

    def __init__(self, name: str, filename: str | None, content_type: str | None, data: bytes) -> None:
        self.name = name
        self.filename = filename
        self.content_type = content_type
        self.data = data

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def _param(header: str, key: str) -> str | None:
    """A parameter of a Content-Disposition or Content-Type header (quoted or bare)."""
    for piece in header.split(";")[1:]:
        k, sep, v = piece.strip().partition("=")
        if sep and k.strip().lower() == key:
            v = v.strip()
            return v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v
    return None


def read_form(content_type: str, body: bytes) -> dict[str, FormPart]:
    """A multipart/form-data body's parts by name (the simulator's reading of a transcription):
    parts are cut where the boundary line occurs (`bytes.find`, no per-byte Python), headers are
    read from each part's head only. A body that is not such a form raises `ValueError`."""
    boundary = _param(content_type, "boundary")
    if not content_type.lower().startswith("multipart/form-data") or not boundary:
        raise ValueError("not a multipart/form-data body with a boundary")
    delim = b"--" + boundary.encode("latin-1")
    start = body.find(delim)
    if start < 0:
        raise ValueError("the boundary does not occur in the body")
    parts: dict[str, FormPart] = {}
    i = start + len(delim)
    sep = b"\r\n" + delim
    while not body.startswith(b"--", i):
        if not body.startswith(b"\r\n", i):
            raise ValueError("a boundary line not followed by CRLF")
        head_end = body.find(b"\r\n\r\n", i + 2)
        end = body.find(sep, i)
        if head_end < 0 or end < 0 or head_end > end:
            raise ValueError("a part without its headers or its closing boundary")
        headers: dict[str, str] = {}
        for line in body[i + 2 : head_end].decode("utf-8", "replace").split("\r\n"):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        disposition = headers.get("content-disposition", "")
        name = _param(disposition, "name")
        if name is None:
            raise ValueError("a part without a name")
        parts[name] = FormPart(
            name, _param(disposition, "filename"), headers.get("content-type"), body[head_end + 4 : end]
        )
        i = end + len(sep)
    return parts
