"""The flags of `oxconsole [run]` and `oxconsole validate`, and the checks no parser makes.

Why this module exists: a person's flags and an agent's arguments (`oxconsole mcp`'s `validate`
and `start`, which build the same argv) must be read by one parser and judged by one check, and
the agents' server must reach them without the command line's way to the console (Textual).
"""

from __future__ import annotations

import argparse

from oxconsole import __version__
from oxconsole.base.exits import Parser
from oxconsole.cli.quickstart import add_flags

__all__ = ["run_parser", "validate_parser"]


def run_parser(prog: str = "oxconsole") -> argparse.ArgumentParser:
    """`oxconsole [run]`'s flags (the agents' `start` parses an argv with it too)."""
    p = Parser(
        prog=prog,
        description="Run an LLM inference workload against any OpenAI-compatible endpoint and watch it live.",
        epilog=(
            'without a file: oxconsole run --url URL [--model M] (docs/workload.md, "Without a file"); '
            "other commands: oxconsole init [PATH] | oxconsole validate WORKLOAD.toml | "
            "oxconsole sim [--port N] | "
            "oxconsole report RESULTS.jsonl [--json] | oxconsole attach [NAME] | oxconsole ps | "
            "oxconsole sweep WORKLOAD.toml --over KEY=V1,V2,... | oxconsole mcp [--http 127.0.0.1:PORT]"
        ),
    )
    p.add_argument(
        "workload", metavar="WORKLOAD.toml", nargs="?", help="the workload file (none: built from --url ...)"
    )
    p.add_argument(
        "--headless", action="store_true", help="no console: progress on stderr, summary on stdout"
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a workload key by dotted path, value parsed as TOML (repeatable)",
    )
    p.add_argument(
        "--resume", action="store_true", help="continue from the results journal: ids already ok are not sent"
    )
    p.add_argument(
        "--summary-json",
        metavar="PATH",
        help="also write the summary JSON to PATH; - (or /dev/stdout): on stdout, and the table on stderr",
    )
    p.add_argument("--output", metavar="PATH", help="override [output] results")
    p.add_argument("--prometheus", metavar="HOST:PORT", help="serve /metrics while the run lasts")
    p.add_argument(
        "--progress-interval",
        type=float,
        default=2.0,
        metavar="S",
        help="headless progress line interval (default 2)",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help='Ray actors on the cluster at ADDR ("local": start Ray here); implies run.cluster="ray"',
    )
    p.add_argument("--theme", metavar="NAME", help="console theme")
    p.add_argument(
        "--refresh", type=float, default=4.0, metavar="HZ", help="console refresh rate (default 4)"
    )
    p.add_argument("--version", action="version", version=f"oxconsole {__version__}")
    add_flags(p)
    return p


def validate_parser() -> argparse.ArgumentParser:
    """`oxconsole validate`'s flags (the agents' `validate` parses an argv with it too)."""
    p = Parser(prog="oxconsole validate", description="Check a workload, its prompts and its key variables.")
    p.add_argument("workload", metavar="WORKLOAD.toml", nargs="?")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--output", metavar="PATH", help=argparse.SUPPRESS)
    add_flags(p)
    return p
