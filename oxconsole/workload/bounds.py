"""The largest values a run can use, each with the reason it was chosen, and the rule for names.

Why this module exists: TOML accepts `inf`, `nan` and integers of any size, and a value that no run
could use must be refused before anything is sent (contract: bad input, exit 2), not found by the
engine mid-run as an overflow, a crash or a silent "unlimited". The limits sit far above anything a
real run asks for; their only job is to keep every number finite, every count a 64-bit integer in
the journal and summary JSON, and every sum of them finite.
"""

from __future__ import annotations

import re

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""Every integer key is a 64-bit integer (as the TOML spec says; tomllib reads larger ones)."""

MAX_CONCURRENCY = 1_000_000
"""run.concurrency, run.burst, endpoints.*.max_connections, sim capacity: each request in flight
holds a task and a connection, and no machine holds a million sockets open."""

MAX_RATE = 1e6
"""run.rate and sim rate_limit, requests per second: beyond what any client sends."""

MAX_COUNT = 10**12
"""run.requests, run.tpm, prompts.repeat, prompts.synthetic.count: a trillion is beyond any run and
keeps counts (and counts times prices) exact in the summary."""

MAX_TRIALS = 1000
"""run.trials: a thousand runs of one workload in a row is beyond any study of its noise (the
interval of a mean narrows as 1/sqrt(N): 1000 trials say it to 3% of what 1 trial says)."""

MAX_TOKENS = 10_000_000
"""models.*.max_tokens, synthetic input/output tokens, sim output_tokens: beyond any model's context."""

MAX_TOKENS_PER_S = 1e6
"""sim tokens_per_s: a simulated decode speed beyond any server."""

MAX_WEIGHT = 1e9
"""models.*.weight: weights are relative shares, so 1e9 against 1 already sends the lighter model
nothing; the cap keeps the sum of every model's weight finite (1e308 twice overflows to inf)."""

MAX_PRICE = 1e6
"""models.*.price_*: per request or per million tokens, beyond any price; keeps cost sums finite."""

MAX_WORKERS = 256
"""run.workers: engine processes, one per core at most is useful."""

MAX_ATTEMPTS = 100
"""retry.max_attempts: more than that is a loop, not a retry."""

MAX_DURATION = 365 * 86400.0
"""Every duration (run.duration, timeouts, backoffs, sim delays): a year is longer than any run."""

NAME_MAX = 64
"""Characters in the workload name: it becomes a folder name (`runs/{name}/`), and 64 characters of
at most 4 UTF-8 bytes each stay within the file system's 255-byte limit with room to spare."""

PATH_PART_MAX = 255
"""Bytes in one part of a results path (Linux and macOS NAME_MAX)."""

PATH_MAX = 4000
"""Bytes in a whole results path (below Linux PATH_MAX, 4096)."""

NAME_RULE = (
    f"a name of at most {NAME_MAX} letters, digits, spaces, '.', '-' or '_', "
    "starting with a letter, digit or '_'"
)
"""The workload name rule, in the words of its error message."""

_NAME = re.compile(r"\w[\w .-]*")
_NOT_NAME = re.compile(r"[^\w .-]")


def is_safe_name(name: str) -> bool:
    """A name that is one plain folder name: no separators, no `..`, no control characters."""
    return len(name) <= NAME_MAX and _NAME.fullmatch(name) is not None


def name_from_stem(stem: str) -> str:
    """The workload name a file name gives when the file has no `name` key.

    Every character outside the name rule becomes `_`, leading dots, spaces and dashes go, and the
    result is cut to NAME_MAX characters, so any file name gives a safe name ("load test (v2)" ->
    "load test _v2_").
    """
    name = _NOT_NAME.sub("_", stem).lstrip(" .-")[:NAME_MAX].rstrip()
    return name or "workload"


def fmt_limit(x: float) -> str:
    """A limit as its error text shows it: 1_000_000 for integers, 1e9 for large floats."""
    if isinstance(x, int):
        return f"{x:_}"
    return f"{x:g}".replace("e+0", "e").replace("e+", "e")
