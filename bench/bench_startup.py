"""Start-up benchmark: wall time of the light commands, and what they import.

`oxconsole --help` and `oxconsole validate examples/demo.toml` are what a user types first and what
scripts call often; they should answer within 300 ms and import neither Textual nor the openai
SDK (importing the SDK alone takes about a second). Each command runs `--runs` times as a fresh
process; the median and the spread are printed, with the modules each one loaded.

    python bench/bench_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 300.0
HEAVY = ("textual", "openai", "aiohttp", "httpx2", "rich")

COMMANDS = {
    "oxconsole --help": ["--help"],
    "oxconsole validate examples/demo.toml": ["validate", "examples/demo.toml"],
}

PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['oxconsole', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('oxconsole', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
)


def timed(cmd: list[str]) -> float:
    """Wall milliseconds of one run of `cmd`."""
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False)
    return (time.perf_counter() - t) * 1000.0


def wall_ms(args: list[str]) -> float:
    return timed([sys.executable, "-m", "oxconsole", *args])


def heavy_imports(args: list[str]) -> list[str]:
    p = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=ROOT, capture_output=True, text=True)
    loaded = set(p.stderr.strip().splitlines()[-1].split()) if p.stderr.strip() else set()
    return [m for m in HEAVY if m in loaded]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    bare = statistics.median(timed([sys.executable, "-c", "pass"]) for _ in range(args.runs))
    print(
        f"start-up benchmark: median of {args.runs} fresh processes, {time.strftime('%Y-%m-%d')}, "
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]} (bare interpreter: {bare:.0f} ms)"
    )
    print(f"{'command':<40}{'median ms':>10}{'min':>7}{'max':>7}  {'< 300 ms':<9} heavy imports")
    for label, cmd in COMMANDS.items():
        wall_ms(cmd)  # warm-up (bytecode caches)
        times = [wall_ms(cmd) for _ in range(args.runs)]
        med = statistics.median(times)
        heavy = heavy_imports(cmd)
        print(
            f"{label:<40}{med:>10.0f}{min(times):>7.0f}{max(times):>7.0f}  "
            f"{'yes' if med < TARGET_MS else 'NO':<9} {', '.join(heavy) or 'none'}"
        )


if __name__ == "__main__":
    main()
