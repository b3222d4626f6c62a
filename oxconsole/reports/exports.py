"""Exports of a run for other tools: one CSV row per record, the summary as Markdown tables.

Why this module exists: a spreadsheet or a notebook wants the records flat (`--csv`), a pull
request wants the figures as Markdown (`--markdown`); both come from the journal and summary alone.
Response text and error details (which may quote a server's body) are left out unless asked
with `--with-text`; keys and headers are never in a journal to begin with.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from oxconsole.journal.records import RequestRecord
from oxconsole.reports.plans import money_cell, plan_table
from oxconsole.reports.quality import MONEY_HEAD, QUALITY_HEAD, quality_tables
from oxconsole.reports.summary import read_journal

__all__ = [
    "CSV_COLUMNS",
    "TEXT_COLUMNS",
    "compare_markdown",
    "record_from_row",
    "render_markdown",
    "write_csv",
]

CSV_COLUMNS = (
    "id", "model", "endpoint", "status", "error", "attempts", "t_scheduled", "t_sent", "queue_ms",
    "ttft_ms", "latency_ms", "itl_ms", "input_tokens", "output_tokens", "tokens_source", "cost",
    "tag", "backoff_ms", "attempt_errors",
)  # fmt: skip
"""The journal's keys, in its order (`attempt_errors` as a JSON object)."""

TEXT_COLUMNS = ("error_detail", "text")
"""Added with `--with-text` only."""


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, dict):
        return orjson.dumps(v).decode()
    return str(v)  # str(float) round-trips exactly


def write_csv(
    results: str | os.PathLike[str], out: str | os.PathLike[str], *, with_text: bool = False
) -> int:
    """One row per journal record (in journal order, a header first); the number of rows."""
    cols = CSV_COLUMNS + (TEXT_COLUMNS if with_text else ())
    n = 0
    dest = Path(out)
    tmp = dest.with_name(dest.name + ".tmp")
    # owner-only like the journal it is made from: `--with-text` rows carry prompts and answers
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(fd, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for rec in read_journal(results):
            w.writerow([_cell(getattr(rec, c)) for c in cols])
            n += 1
    os.replace(tmp, dest)
    return n


def record_from_row(row: Mapping[str, str]) -> RequestRecord:
    """A CSV row back into a record (what the round-trip test checks)."""
    d: dict[str, Any] = {k: v for k, v in row.items() if v != ""}
    if "attempt_errors" in d:
        d["attempt_errors"] = orjson.loads(d["attempt_errors"])
    return RequestRecord.from_json_dict(d)


# -- Markdown --------------------------------------------------------------------------------


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    align = ["---"] + ["---:"] * (len(head) - 1)
    return [
        "| " + " | ".join(map(esc, head)) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(map(esc, r)) + " |" for r in rows),
    ]


def _f(v: Any, nd: int = 1) -> str:
    try:
        return f"{float(v):,.{nd}f}"
    except (TypeError, ValueError):
        return "-"


_TIMINGS = (("TTFT", "ttft_ms"), ("ITL", "itl_ms"), ("latency", "latency_ms"), ("queue", "queue_ms"))


def render_markdown(s: Mapping[str, Any]) -> str:
    """The summary as Markdown: totals, timings, models, errors, plans, quality and the cascade."""
    req = s.get("requests") or {}
    thr = s.get("throughput") or {}
    out = [f"### {s.get('name', '')}", "", f"{_f(s.get('duration_s'))} s from {s.get('started_at', '?')}", ""]
    out += _md_table(
        ["requests", "ok", "error", "retried", "req/s", "output tok/s", "cost"],
        [[f"{req.get('total', 0):,}", f"{req.get('ok', 0):,}", f"{req.get('error', 0):,}",
          f"{req.get('retried', 0):,}", _f(thr.get("requests_per_s"), 2), _f(thr.get("output_tokens_per_s")),
          _f((s.get("cost") or {}).get("total"), 4)]],
    )  # fmt: skip
    cols = ("mean", "p50", "p90", "p95", "p99", "max")
    out += ["", *_md_table(["ms", *cols], [
        [label, *(_f((s.get(key) or {}).get(c)) for c in cols)]
        for label, key in _TIMINGS
    ])]  # fmt: skip
    models = s.get("models") or {}
    if models:
        rows = []
        for name, m in models.items():
            r = m.get("requests") or {}
            rows.append([str(name), f"{r.get('total', 0):,}", f"{r.get('error', 0):,}",
                         _f((m.get("throughput") or {}).get("requests_per_s"), 2),
                         _f((m.get("ttft_ms") or {}).get("p50")), _f((m.get("latency_ms") or {}).get("p50")),
                         _f((m.get("latency_ms") or {}).get("p99")),
                         _f((m.get("cost") or {}).get("total"), 4)])  # fmt: skip
        out += [
            "",
            *_md_table(
                ["model", "requests", "error", "req/s", "TTFT p50", "lat p50", "lat p99", "cost"], rows
            ),
        ]
    errors = s.get("errors") or {}
    if errors:
        out += ["", *_md_table(["error", "requests"], [[k, f"{v:,}"] for k, v in errors.items()])]
    head, plans = plan_table(s)
    if plans:
        out += ["", *_md_table(head, plans)]
    quality = quality_tables(s)
    if quality is not None:
        note, models, money = quality
        out += ["", "#### Quality and the cascade", "", note, "", *_md_table(QUALITY_HEAD, models)]
        out += ["", *_md_table(MONEY_HEAD, money)]
    return "\n".join(out) + "\n"


def compare_markdown(c: Mapping[str, Any]) -> str:
    """A comparison (see `compare.compare`) as one Markdown table."""
    names = [r.get("label") or r["name"] or r["path"] for r in c["runs"]]
    head = ["figure", names[0]]
    for n in names[1:]:
        head += [n, "Δ%"]
    rows = []
    for row in c["figures"]:
        fmt = money_cell if str(row["figure"]).startswith("cost") else partial(_f, nd=2)
        cells = [row["label"], fmt(row["values"][0])]
        for v, d, noise in zip(row["values"][1:], row["delta_pct"][1:], row["within_noise"][1:], strict=True):
            mark = " (~)" if noise else ""
            cells += [fmt(v), "-" if d is None else f"{d:+.1f}%{mark}"]
        rows.append(cells)
    note = f"(~) within noise: {c['confidence']:.0%} bootstrap intervals overlap"
    said = [f"- {t}" for t in c.get("trials") or ()]
    trials = ["", "Over the trials (95% t-intervals of each run's trials):", "", *said] if said else []
    return "\n".join([*_md_table(head, rows), "", note, *trials]) + "\n"
