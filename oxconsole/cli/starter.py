"""`oxconsole init [PATH]`: a commented starter workload to edit, never written over a file.

Why this module exists: a new user's second step, after `oxconsole run --url ...`, is a file of
their own; this one runs as it is (against the embedded simulator) and says, beside each key,
what to change to point it at a real server. Every key in it is checked by the tests
(`oxconsole validate` of the written file).
"""

from __future__ import annotations

from pathlib import Path

from oxconsole.base.exits import EXIT_BAD_INPUT, EXIT_OK, Parser

__all__ = ["STARTER", "init_main"]

DEFAULT_PATH = "workload.toml"

STARTER = """\
# An oxconsole workload. Run it:   oxconsole {path}
# Check it without sending:        oxconsole validate {path}
# Every key: docs/workload.md. Durations: "500ms", "90s", "10m"; rates in requests/s.
name = "starter"                   # titles and the results folder (runs/starter/)

[run]
concurrency = 8                    # requests in flight at most (+ / - in the console)
rate = 0                           # requests/s; 0 = as fast as concurrency allows
requests = 100                     # total to send; 0 = one per prompt
# duration = "60s"                 # or stop after this long
timeout = "60s"                    # per attempt
stream = true                      # streaming gives TTFT and inter-token latency

[endpoints.default]
base_url = "sim"                   # the embedded simulator; a real server: "http://localhost:8000/v1"
# api_key_env = "OPENAI_API_KEY"   # the variable holding the key (never the key itself)

[[models]]
name = "my-model"                  # as the server names it (GET /v1/models lists them)
max_tokens = 128
# weight = 1                       # share of traffic when there are several models
# price_per_1m_input = 0.0         # prices give a cost figure
# price_per_1m_output = 0.0

[prompts]
# synthetic prompts of these lengths in tokens; or file = "prompts.jsonl" (one
# {{"id", "prompt"}} object a line), or items = ["...", "..."]
synthetic = {{ count = 100, input_tokens = 256, output_tokens = 128 }}

# [slo]                            # what a good request is; the run exits 3 when not met
# ttft = "500ms"
# target = 0.95

[sim.models."my-model"]            # only read while base_url = "sim"
ttft = "150ms"
tokens_per_s = 80.0
output_tokens = 128
"""


def init_main(argv: list[str]) -> int:
    p = Parser(prog="oxconsole init", description="Write a commented starter workload.")
    p.add_argument("path", metavar="PATH", nargs="?", default=DEFAULT_PATH, help=f"default {DEFAULT_PATH}")
    ns = p.parse_args(argv)
    import sys

    path = Path(ns.path)
    text = STARTER.format(path=ns.path)
    try:
        with open(path, "x", encoding="utf-8") as f:  # "x": an existing file is never written over
            f.write(text)
    except FileExistsError:
        print(
            f"oxconsole init: {path}: expected a path with no file yet (an existing file is never "
            "overwritten), found one; give another PATH",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    except OSError as e:
        print(
            f"oxconsole init: {path}: expected a file that can be written, but {e.strerror or e}",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    print(f"wrote {path}; run it with: oxconsole {path}  (check it with: oxconsole validate {path})")
    return EXIT_OK
