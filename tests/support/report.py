"""Shared helpers for the report tests: journals from records, real runs on the simulator, and an
HTML report read back (its tags, ids and anything that would fetch)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import orjson

from oxconsole.journal.records import RequestRecord
from tests.support import oxconsole_here
from tests.support.metrics import make_records
from tests.support.workloads import Sets, write_workload

SECRET_TEXT = "RESPONSE-TEXT-SECRET"
SECRET_DETAIL = "DETAIL-SECRET"

STAGES: Sets = {
    "slo": {"ttft": "200ms", "target": 0.5},
    "stages": [
        {"duration": "0.6s", "concurrency": 2, "warmup": True},
        {"duration": "0.8s", "concurrency": 6},
    ],
}
"""A run's `sets` for an SLO and two stages, the first a warm-up: a report then has phases,
stages and goodput to show."""


def write_journal(path: Path, recs: list[RequestRecord]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for r in recs:
            f.write(orjson.dumps(r.to_json_dict()) + b"\n")
    return path


def secret_records(n: int = 2000) -> list[RequestRecord]:
    """`make_records` with response text and error details that must never reach a report."""
    recs = make_records(n)
    for r in recs:
        if r.status == "ok":
            r.text = SECRET_TEXT
        else:
            r.error_detail = SECRET_DETAIL
    return recs


def sim_workload(
    folder: Path,
    *,
    ttft: str = "20ms",
    count: int = 200,
    seed: int = 1,
    jitter: float = 0.2,
    concurrency: int = 8,
    sets: Sets | None = None,
) -> Path:
    """tests/workloads/sim_paced.toml as folder/w.toml (its path): a run named after the folder and
    journaled in it, `count` prompts answered with 8 tokens by "m" (at $0.001 a request) `ttft`
    after admission, then at 400 tokens a second; then `sets`."""
    folder.mkdir(parents=True, exist_ok=True)
    run: Sets = {
        "name": folder.name,
        "run.concurrency": concurrency,
        "run.seed": seed,
        "output.results": str(folder / "results.jsonl"),
        "models.0.price_per_request": 0.001,
        "prompts.synthetic": {"count": count, "input_tokens": 5, "output_tokens": 8},
        "sim.models.m": {"ttft": ttft, "tokens_per_s": 400, "jitter": jitter},
    }
    return write_workload("sim_paced", folder, {**run, **(sets or {})}, file="w.toml")


def sim_run(
    folder: Path,
    *,
    ttft: str = "20ms",
    count: int = 200,
    seed: int = 1,
    jitter: float = 0.2,
    concurrency: int = 8,
    sets: Sets | None = None,
    args: tuple[str, ...] = (),
) -> Path:
    """Run a workload headless against the simulator (the command line, in this process); its
    journal's path."""
    wl = sim_workload(
        folder, ttft=ttft, count=count, seed=seed, jitter=jitter, concurrency=concurrency, sets=sets
    )
    r = oxconsole_here(str(wl), "--headless", *args, cwd=folder)
    assert r.returncode == 0, r.stderr
    return folder / "results.jsonl"


class Page(HTMLParser):
    """Every tag, the ids, and any attribute that could fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.ids: set[str] = set()
        self.fetches: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for k, v in attrs:
            if k == "id" and v:
                self.ids.add(v)
            if k in ("src", "href", "srcset", "data", "action", "poster", "xlink:href"):
                self.fetches.append(f"{tag} {k}={v}")


def parse(text: str) -> Page:
    """An HTML report read into a `Page`."""
    p = Page()
    p.feed(text)
    return p
