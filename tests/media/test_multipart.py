from __future__ import annotations

import asyncio
import email.parser
import email.policy

import aiohttp
import pytest

from oxconsole.media.multipart import FormTemplate, read_form, transcription_form
from oxconsole.media.wav import SyntheticWav


def parse(content_type: str, body: bytes) -> dict[str, tuple[str | None, str, bytes]]:
    """A form read back by the stdlib's MIME parser: name -> (filename, content type, bytes)."""
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    assert msg.is_multipart() and not msg.defects
    out = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        ctype = part.get_content_type()  # text/plain where a part names none (RFC 7578)
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes)
        out[str(name)] = (part.get_filename(), ctype, payload)
    return out


def test_transcription_form_reads_back() -> None:
    wav = SyntheticWav(1.0)
    form = transcription_form("whisper-1", response_format="verbose_json", extra={"language": "en"})
    body = form.body(*wav.parts(3))
    assert len(body) == form.size(len(wav.wav(3)))
    got = parse(form.content_type, body)
    assert list(got) == ["model", "response_format", "language", "file"]
    assert got["model"][2] == b"whisper-1" and got["response_format"][2] == b"verbose_json"
    assert got["file"] == ("audio.wav", "audio/wav", wav.wav(3))


def test_same_body_as_aiohttp_formdata_reads() -> None:
    data = SyntheticWav(0.2).wav(1)
    form = FormTemplate({"model": "m"}, filename="a.wav")

    async def aiohttp_body() -> tuple[str, bytes]:
        fd = aiohttp.FormData()
        fd.add_field("model", "m")
        fd.add_field("file", data, filename="a.wav", content_type="audio/wav")
        writer = fd()
        return writer.content_type, await writer.as_bytes()

    ctype, theirs = asyncio.run(aiohttp_body())
    assert parse(ctype, theirs) == parse(form.content_type, form.body(data))


def test_names_are_quoted() -> None:
    form = FormTemplate({"a": "1"}, filename='we"ird\r\nname.wav')
    body = form.body(b"x")
    assert b'filename="we%22ird%0D%0Aname.wav"' in body


def test_boundary_in_the_file_is_refused_when_checked() -> None:
    form = FormTemplate({}, boundary="abc123")
    with pytest.raises(ValueError, match="boundary"):
        form.body(b"..abc123..", check=True)
    assert form.body(b"..abc123..")  # unchecked: the caller's choice


def test_boundaries_differ_per_template() -> None:
    assert FormTemplate({}).boundary != FormTemplate({}).boundary


def test_read_form_reads_ours_and_aiohttps() -> None:
    data = SyntheticWav(0.3).wav(2)
    form = transcription_form("whisper-1", extra={"stream": "true"})
    parts = read_form(form.content_type, form.body(data))
    assert [p.name for p in parts.values()] == ["model", "response_format", "stream", "file"]
    assert parts["model"].text() == "whisper-1" and parts["model"].filename is None
    assert (parts["file"].filename, parts["file"].content_type, parts["file"].data) == (
        "audio.wav",
        "audio/wav",
        data,
    )

    async def aiohttp_body() -> tuple[str, bytes]:
        fd = aiohttp.FormData()
        fd.add_field("model", "m")
        fd.add_field("file", data, filename="x.wav", content_type="audio/wav")
        writer = fd()
        return writer.content_type, await writer.as_bytes()

    ctype, body = asyncio.run(aiohttp_body())
    theirs = read_form(ctype, body)
    assert (
        theirs["file"].data == data and theirs["file"].filename == "x.wav" and theirs["model"].text() == "m"
    )


@pytest.mark.parametrize(
    ("ctype", "body"),
    [
        ("application/json", b"{}"),
        ("multipart/form-data; boundary=zz", b"no boundary here"),
        ("multipart/form-data; boundary=zz", b"--zz\r\nContent-Disposition: form-data; name=a\r\n\r\nno end"),
        ("multipart/form-data; boundary=zz", b"--zz\r\nContent-Type: text/plain\r\n\r\nx\r\n--zz--\r\n"),
    ],
)
def test_read_form_refuses(ctype: str, body: bytes) -> None:
    with pytest.raises(ValueError):
        read_form(ctype, body)


def test_a_request_names_its_own_file() -> None:
    form = transcription_form("m")
    data = b"ID3\x04" + bytes(20)
    body = form.body(data, filename="a b.mp3", file_type="audio/mpeg")
    parts = read_form(form.content_type, body)
    assert (parts["file"].filename, parts["file"].content_type, parts["file"].data) == (
        "a b.mp3",
        "audio/mpeg",
        data,
    )
    assert read_form(form.content_type, form.body(data))["file"].filename == "audio.wav"
