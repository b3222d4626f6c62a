"""Tests of the media room (oxconsole/media/), and the fixtures they read: a 1.5 s tone in every
audio format a prompts line may name and a small image in each image format, made by
fixtures/make.sh (sox and ffmpeg)."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture_bytes(name: str) -> bytes:
    """A fixture file's bytes."""
    return (FIXTURES / name).read_bytes()
