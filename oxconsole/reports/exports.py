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

from oxconsole.base.figures import (
    BLOCK_KEYS,
    COST,
    ITL,
    LATENCY,
    OUTPUT_TOKENS_PER_S,
    QUEUE,
    REQUESTS,
    REQUESTS_PER_S,
    TIMINGS,
    TOKENS_IN,
    TOKENS_OUT,
    TTFT,
)
from oxconsole.base.safetext import csv_cell, csv_value, md_cell
from oxconsole.base.units import fmt_money
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
    "id", "model", "endpoint", "status", "error", "attempts", "t_scheduled", "t_sent",
    *(f.journal for f in (QUEUE, TTFT, LATENCY, ITL, TOKENS_IN, TOKENS_OUT)), "tokens_source",
    COST.journal, "tag", "backoff_ms", "attempt_errors",
)  # fmt: skip
"""The journal's keys, in its order (`attempt_errors` as a JSON object)."""

TEXT_COLUMNS = ("error_detail", "text")
"""Added with `--with-text` only."""


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, dict):
        return orjson.dumps(v).decode()
    if isinstance(v, str):  # a name or a text: never a formula (`=HYPERLINK(...)`) in a spreadsheet
        return csv_cell(v)
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
    d: dict[str, Any] = {k: csv_value(v) for k, v in row.items() if v != ""}
    if "attempt_errors" in d:
        d["attempt_errors"] = orjson.loads(d["attempt_errors"])
    return RequestRecord.from_json_dict(d)


# -- Markdown --------------------------------------------------------------------------------


def _md_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    esc = md_cell  # a name is text: no `|` splitting the row, no HTML, no code, no control character
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


def render_markdown(s: Mapping[str, Any]) -> str:
    """The summary as Markdown: totals, timings, models, errors, plans, quality and the cascade."""
    req = s.get("requests") or {}
    out = [
        f"### {md_cell(str(s.get('name', '')))}",
        "",
        f"{_f(s.get('duration_s'))} s from {md_cell(str(s.get('started_at', '?')))}",
        "",
    ]
    head = [
        REQUESTS.label,
        "ok",
        "error",
        "retried",
        REQUESTS_PER_S.short,
        OUTPUT_TOKENS_PER_S.label,
        COST.label,
    ]
    out += _md_table(
        head,
        [[f"{req.get('total', 0):,}", f"{req.get('ok', 0):,}", f"{req.get('error', 0):,}",
          f"{req.get('retried', 0):,}", _f(REQUESTS_PER_S.of(s), 2), _f(OUTPUT_TOKENS_PER_S.of(s)),
          fmt_money(COST.of(s))]],
    )  # fmt: skip
    out += ["", *_md_table(["ms", *BLOCK_KEYS], [
        [f.label, *(_f(f.at(c).of(s)) for c in BLOCK_KEYS)] for f in TIMINGS
    ])]  # fmt: skip
    models = s.get("models") or {}
    if models:
        rows = []
        timings = (TTFT.at("p50"), LATENCY.at("p50"), LATENCY.at("p99"))
        for name, m in models.items():
            r = m.get("requests") or {}
            rows.append([str(name), f"{r.get('total', 0):,}", f"{r.get('error', 0):,}",
                         _f(REQUESTS_PER_S.of(m), 2), *(_f(f.of(m)) for f in timings),
                         fmt_money(COST.of(m))])  # fmt: skip
        head = [
            "model",
            REQUESTS.label,
            "error",
            REQUESTS_PER_S.short,
            *(f.short for f in timings),
            COST.label,
        ]
        out += ["", *_md_table(head, rows)]
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
    return "\n".join([*_md_table(head, rows), "", note]) + "\n"
