"""An audio file's length in seconds from its headers: WAV, MP3, FLAC, Ogg (Vorbis, Opus), MP4 and
WebM, without decoding it.

Why this module exists: `audio_in_s` (and a transcription's `rtf` and its price per audio minute)
needs each prompts line's audio length, learnt once when the file is read, before the run. WAV is
read here (its `fmt ` and `data` chunks: any encoding, WAVE_FORMAT_EXTENSIBLE included, which the
stdlib `wave` of Python 3.11 refuses), and so is WebM (EBML: the Segment's Info holds Duration and
TimecodeScale), which neither tinytag nor mutagen reads. MP3 (Xing/Info/VBRI headers, else a frame
scan), FLAC (STREAMINFO), Ogg (the last page's granule position) and MP4 go to tinytag (MIT, pure
Python, one 2,500-line module, typed), imported only when such a file is met.
"""

from __future__ import annotations

import io
import struct

from oxconsole.media.kinds import MediaError, an, audio_type


def audio_seconds(data: bytes, where: str = "audio") -> float:
    """The length of the audio in `data`; `MediaError` naming `where` when it is not audio of a
    known kind or its length cannot be read from it."""
    kind = audio_type(data)
    try:
        if kind == "wav":
            return riff_seconds(data)
        if kind == "webm":
            seconds = webm_seconds(data)
        elif kind is not None:
            seconds = _tinytag_seconds(data)
        else:
            raise MediaError(where, "a WAV, MP3, FLAC, Ogg, WebM or MP4 audio file", f"{data[:8]!r}")
    except (struct.error, ValueError, IndexError) as e:
        if isinstance(e, MediaError):
            raise
        raise MediaError(where, an(f"{(kind or 'audio').upper()} header that can be read"), str(e)) from None
    if seconds is None:
        raise MediaError(where, an(f"{kind.upper()} file whose headers tell its length"), "none")
    return seconds


def riff_seconds(data: bytes) -> float:
    """A WAV's length: its `data` chunk's size over the `fmt ` chunk's bytes per second. A `data`
    size past the end of the file (a stream written without seeking back) counts what is there."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE file")
    i = 12
    byte_rate = 0
    while i + 8 <= len(data):
        cid = data[i : i + 4]
        size = int.from_bytes(data[i + 4 : i + 8], "little")
        if cid == b"fmt ":
            byte_rate = int.from_bytes(data[i + 16 : i + 20], "little")
        elif cid == b"data":
            if not byte_rate:
                raise ValueError("data chunk before any fmt chunk")
            return min(size, len(data) - i - 8) / byte_rate
        i += 8 + size + (size & 1)  # chunks are padded to even sizes
    raise ValueError("no data chunk")


# -- WebM / Matroska (EBML) ---------------------------------------------------------------------

_SEGMENT, _INFO, _CLUSTER = 0x18538067, 0x1549A966, 0x1F43B675
_TIMECODE_SCALE, _DURATION = 0x2AD7B1, 0x4489
_CLUSTER_TIMECODE, _SIMPLE_BLOCK, _BLOCK_GROUP, _BLOCK = 0xE7, 0xA3, 0xA0, 0xA1
_UNKNOWN = -1


def _vint(data: bytes, i: int, keep_marker: bool) -> tuple[int, int]:
    """An EBML variable-length integer at `i`: (value, next index); an element id keeps its
    length marker, a size drops it, and a size of all ones is `_UNKNOWN`."""
    first = data[i]
    if first == 0:
        raise ValueError(f"bad EBML length at byte {i}")
    n = 9 - first.bit_length()
    if len(data) < i + n:
        raise ValueError("EBML element cut short")
    value = int.from_bytes(data[i : i + n], "big")
    if keep_marker:
        return value, i + n
    value &= (1 << (7 * n)) - 1
    return (_UNKNOWN if value == (1 << (7 * n)) - 1 else value), i + n


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    """(id, data start, data end) of each element between `start` and `end`. An element of
    unknown size (a live recording's Segment or Cluster) runs to `end`, except a Cluster's: it is
    listed empty and its children follow it in the list (it ends where the next Cluster starts)."""
    out: list[tuple[int, int, int]] = []
    i = start
    while i < end:
        eid, i = _vint(data, i, keep_marker=True)
        size, i = _vint(data, i, keep_marker=False)
        if size == _UNKNOWN and eid == _CLUSTER:
            out.append((eid, i, i))
            continue
        stop = end if size == _UNKNOWN else min(i + size, end)
        out.append((eid, i, stop))
        i = stop
    return out


class _Blocks:
    """The latest block time seen (in timecode units): each Cluster's Timecode plus its blocks'
    relative times."""

    __slots__ = ("cluster", "last")

    def __init__(self) -> None:
        self.cluster = 0
        self.last: int | None = None

    def element(self, data: bytes, eid: int, s: int, e: int) -> None:
        if eid == _CLUSTER:
            for cid, cs, ce in _children(data, s, e):
                self.element(data, cid, cs, ce)
        elif eid == _CLUSTER_TIMECODE:
            self.cluster = int.from_bytes(data[s:e], "big")
        elif eid == _BLOCK_GROUP:
            for bid, bs, be in _children(data, s, e):
                if bid == _BLOCK:
                    self.element(data, _SIMPLE_BLOCK, bs, be)
        elif eid == _SIMPLE_BLOCK:
            _, j = _vint(data, s, keep_marker=False)  # the track number
            (rel,) = struct.unpack(">h", data[j : j + 2])
            t = self.cluster + rel
            self.last = t if self.last is None else max(self.last, t)


def webm_seconds(data: bytes) -> float | None:
    """The Segment's Info Duration x TimecodeScale; without a Duration (a browser's MediaRecorder
    writes none), the last block's time, which is one frame (20 ms of Opus) short. None when
    there are no blocks either."""
    segment = next(((s, e) for eid, s, e in _children(data, 0, len(data)) if eid == _SEGMENT), None)
    if segment is None:
        raise ValueError("no Segment element")
    scale = 1_000_000  # ns per timecode unit (Matroska's default)
    blocks = _Blocks()
    for eid, s, e in _children(data, *segment):
        if eid == _INFO:
            duration: float | None = None
            for cid, cs, ce in _children(data, s, e):
                if cid == _TIMECODE_SCALE:
                    scale = int.from_bytes(data[cs:ce], "big")
                elif cid == _DURATION:
                    (duration,) = struct.unpack(">f" if ce - cs == 4 else ">d", data[cs:ce])
            if duration is not None:
                return duration * scale / 1e9
        else:
            blocks.element(data, eid, s, e)
    return None if blocks.last is None else blocks.last * scale / 1e9


def _tinytag_seconds(data: bytes) -> float | None:
    from tinytag import TinyTag, TinyTagException  # only when such a file is met

    try:
        tag = TinyTag.get(file_obj=io.BytesIO(data), tags=False, duration=True)
    except TinyTagException as e:  # a broken header: what the file is not, said as a ValueError
        raise ValueError(str(e)) from None
    return tag.duration
