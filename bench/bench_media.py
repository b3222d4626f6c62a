"""What a media request's body costs the client to build, against a text-only request's, in one run.

Why this file exists: every body is built before the clock, on the loop that times requests; a
body with a 512x512 image or 30 s of audio must cost at most 2 ms of CPU more than a text body
(the target of docs/media.md). Each case builds its body through the engine's own path
(`Bodies.body`, then the bytes the attempt sends: `orjson.dumps`, or a transcription's form as
built) N times and prints the median CPU per body over REPS repetitions, the extra over the text
body, and whether it is within the target. A file's data URL or base64 is made once per run (the
first build); that one-time cost is printed apart, as are a synthetic image size's constant rows.
Also printed: what importing tinytag (MP3, FLAC, Ogg and MP4 lengths) costs a fresh interpreter.

    python bench/bench_media.py [--n 300] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from oxconsole.engine.send.adapt import Bodies
from oxconsole.engine.send.attempt import Encoded
from oxconsole.media.png import SyntheticPng
from oxconsole.media.wav import SyntheticWav
from oxconsole.workload import ModelConfig, Prompt
from oxconsole.workload.prompts.mediafiles import audio_file, image_file
from oxconsole.workload.prompts.promptdata import ImageInput, PromptMedia
from oxconsole.workload.schema import SyntheticImages

TARGET_US = 2000.0
"""The most a media body may cost beyond a text body (CPU microseconds)."""

TEXT = "The quick brown fox jumps over the lazy dog. " * 18  # ~200 tokens


def prompt(i: int, media: PromptMedia | None = None) -> Prompt:
    return Prompt(
        f"p{i}", [{"role": "user", "content": TEXT}], max_tokens=64, input_chars=len(TEXT), media=media
    )


def build(bodies: Bodies, m: ModelConfig, p: Prompt) -> int:
    """One body as the attempt sends it: built, then in bytes (its length)."""
    body = bodies.body(p, m)
    data = body.data if isinstance(body, Encoded) else orjson.dumps(body)
    return len(data)


def cpu_per_body(make: Callable[[int], int], n: int, reps: int) -> tuple[float, int]:
    """Median CPU microseconds per body over `reps` runs of `n`, and a body's size."""
    size = make(0)  # the first build, which may make what later builds reuse
    times = []
    for _ in range(reps):
        t0 = time.process_time()
        for i in range(n):
            make(i)
        times.append((time.process_time() - t0) / n * 1e6)
    return statistics.median(times), size


def import_ms(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print((time.perf_counter() - t) * 1000)"
    runs = []
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        runs.append(float(out.stdout))
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="oxc-bench-media-"))
    png_path = folder / "photo.png"
    png_path.write_bytes(SyntheticPng(512, 512, noise=0.5).png(1))  # about a photo's PNG: ~400 KB
    wav_path = folder / "speech.wav"
    wav_path.write_bytes(SyntheticWav(30.0).wav(1))

    chat = ModelConfig("chat", max_tokens=64)
    stt = ModelConfig("stt", api="transcriptions")
    rr = ModelConfig("rr", api="rerank")
    syn512 = SyntheticImages(1, 512, 512)

    t0 = time.process_time()
    image = image_file(png_path, "photo.png")
    audio = audio_file(wav_path, "speech.wav")
    read_ms = (time.process_time() - t0) * 1000
    t0 = time.process_time()
    image.data_url()
    audio.b64()
    encode_ms = (time.process_time() - t0) * 1000

    docs = tuple(TEXT for _ in range(32))
    cases: list[tuple[str, ModelConfig, Callable[[int], PromptMedia | None]]] = [
        ("chat, text only (~200 tokens)", chat, lambda i: None),
        ("chat + 1 synthetic image 512x512", chat, lambda i: PromptMedia(synthetic_images=syn512, seed=i)),
        (
            "chat + 1 image file 512x512 (~400 KB)",
            chat,
            lambda i: PromptMedia(images=(ImageInput(file=image),)),
        ),
        ("chat + input_audio 30 s synthetic", chat, lambda i: PromptMedia(audio_s=30.0, seed=i)),
        ("chat + input_audio 30 s file", chat, lambda i: PromptMedia(audio=audio)),
        ("transcription 30 s synthetic", stt, lambda i: PromptMedia(audio_s=30.0, seed=i)),
        ("transcription 30 s file", stt, lambda i: PromptMedia(audio=audio)),
        ("rerank, 32 documents of ~200 tokens", rr, lambda i: PromptMedia(documents=docs)),
    ]
    bodies = Bodies([chat, stt, rr], stream=True, warnings=[])
    t0 = time.process_time()
    bodies.media.png(syn512)
    bodies.media.wav(30.0)
    synth_ms = (time.process_time() - t0) * 1000

    print(f"body build CPU per request, median of {args.reps} x {args.n}, in one run")
    print(f"{'body':<42}{'CPU us':>10}{'extra us':>10}{'bytes':>12}  target (extra <= {TARGET_US:.0f} us)")
    base = 0.0
    worst = 0.0
    for name, m, media_of in cases:
        prompts = [prompt(i, media_of(i)) for i in range(args.n)]

        def make(i: int, m: ModelConfig = m, ps: list[Prompt] = prompts) -> int:
            return build(bodies, m, ps[i])

        us, size = cpu_per_body(make, args.n, args.reps)
        if not base:
            base = us
        extra = us - base
        if name != cases[0][0]:
            worst = max(worst, extra)
        verdict = "" if name == cases[0][0] else ("ok" if extra <= TARGET_US else "OVER")
        print(f"{name:<42}{us:>10.1f}{extra:>10.1f}{size:>12,}  {verdict}")
    print()
    print("once per run, before the clock (ms CPU):")
    print(f"  read, check and measure a 512x512 PNG and a 30 s WAV: {read_ms:.1f}")
    print(f"  their data URL and base64 (once per file):             {encode_ms:.1f}")
    print(f"  a synthetic 512x512 size and a 30 s clip (per process): {synth_ms:.1f}")
    print(f"importing tinytag in a fresh interpreter: {import_ms('tinytag'):.1f} ms (median of 5)")
    within = "within" if worst <= TARGET_US else "OVER"
    print(f"worst extra over the text body: {worst:.0f} us ({within} the target)")


if __name__ == "__main__":
    main()
