"""What `oxconsole validate` prints: the workload in plain words, section by section, then warnings.

Why this module exists: the user sees what would run (endpoints, models, prompts, routing, run and
retry settings) before anything is sent, and which settings look like mistakes. Key values are never
shown, only whether their variables are set.
"""

from __future__ import annotations

import json
import os

from oxconsole.base.units import fmt_decimal
from oxconsole.workload.loadshape import describe_stages
from oxconsole.workload.packing import describe_packing
from oxconsole.workload.plans import describe_plans
from oxconsole.workload.problems import did_you_mean
from oxconsole.workload.prompts.lengths import describe_length, fmt_stats
from oxconsole.workload.prompts.promptdata import PromptStats
from oxconsole.workload.prompts.traces import TRACE_FORMATS
from oxconsole.workload.quality import quality_lines
from oxconsole.workload.schema import API_PATHS, GENERATING_APIS, RETRY_WORDS, Prices, Workload, fill_results
from oxconsole.workload.slo import slo_lines, slo_warnings
from oxconsole.workload.values import fmt_duration


def _fmt_num(x: float) -> str:
    return fmt_decimal(x)


def describe(w: Workload, stats: PromptStats) -> str:
    """Human-readable summary of what would run, followed by warnings. Never shows key values."""
    lines: list[str] = [f"workload  {w.name}  ({w.path})"]
    lines += _endpoint_lines(w)
    lines += _model_lines(w)
    lines += _prompt_lines(w, stats)
    lines += _routing_lines(w)
    lines += _run_lines(w)
    lines += slo_lines(w.slo)
    stage_lines, stage_warnings = describe_stages(w, stats.total_requests)
    lines += stage_lines
    lines += describe_plans(w.plans)
    lines += describe_packing(w.packing)
    lines += quality_lines(w.quality, w.routing.cascade)
    warnings = _warnings(w, stats) + slo_warnings(w.slo, w.run.stream) + stage_warnings
    if warnings:
        lines += ["", "warnings"] + [f"  - {x}" for x in warnings]
    return "\n".join(lines) + "\n"


def _endpoint_lines(w: Workload) -> list[str]:
    lines = ["", "endpoints"]
    width = max(len(n) for n in w.endpoints)
    for ep in w.endpoints.values():
        url = "sim (embedded simulator)" if ep.base_url == "sim" else ep.base_url
        if ep.api_key_env is None:
            key = "no key"
        else:
            state = "set" if os.environ.get(ep.api_key_env, "").strip() else "NOT SET"
            key = f"key from ${ep.api_key_env} ({state})"
        extra = ", TLS verification OFF" if ep.insecure else ""
        extra += ", paced by its x-ratelimit-* headers" if ep.pace_by_headers else ""
        names = list(ep.headers) + [
            f"{h} from ${v} ({'set' if os.environ.get(v, '').strip() else 'NOT SET'})"
            for h, v in ep.headers_env.items()
        ]
        if names:
            extra += ", headers " + ", ".join(names)
        lines.append(f"  {ep.name:<{width}}  {url}  {key}, max {ep.max_connections} connections{extra}")
    return lines


def _model_lines(w: Workload) -> list[str]:
    lines = ["", "models"]
    total_w = sum(m.weight for m in w.models) or 1.0
    width = max(len(m.name) for m in w.models)
    for m in w.models:
        bits = [f"endpoint {m.endpoint}", f"weight {_fmt_num(m.weight)} ({m.weight / total_w:.0%})"]
        if m.api != "chat":
            bits.insert(0, f"api {m.api} ({API_PATHS[m.api]})")
        if m.api == "speech":
            bits.append(f"voice {m.voice}")
        elif m.api == "images":
            bits.append(f"{m.n} x {m.size} per request")
        if m.api in GENERATING_APIS:  # (an embedding, a ranking, audio or an image has no tokens to cap)
            bits.append(
                f"{m.max_tokens_param} {m.max_tokens}" if m.max_tokens is not None else "max_tokens not sent"
            )
        if m.temperature is not None:
            bits.append(f"temperature {_fmt_num(m.temperature)}")
        if m.ignore_eos:
            bits.append("ignore_eos")
        if m.extra_body:
            bits.append("extra_body " + ", ".join(m.extra_body))
        own = Prices(
            m.price_per_request,
            m.price_per_1m_input,
            m.price_per_1m_output,
            m.price_per_1m_cached_input,
            m.price_per_image,
            m.price_per_audio_minute,
            m.price_per_1m_characters,
        )
        prices = [f"{_fmt_num(v)}/{what}" for v, what in own.given()]
        bits.append("price " + " + ".join(prices) if prices else "no pricing")
        lines.append(f"  {m.name:<{width}}  " + ", ".join(bits))
    return lines


def _prompt_lines(w: Workload, stats: PromptStats) -> list[str]:
    pc, run = w.prompts, w.run
    if pc.file is not None:
        source = {
            "jsonl": "file",
            "sharegpt": "ShareGPT file",
            "openai-batch": "OpenAI Batch input file",
            "mooncake": "Mooncake trace",
            "azure-trace": "Azure trace",
            "burstgpt": "BurstGPT trace",
        }[pc.format] + f" {pc.file}"
    elif pc.items is not None:
        source = "inline items"
    else:
        assert pc.synthetic is not None
        s = pc.synthetic
        prefix = f" after a shared prefix of {s.prefix_tokens}" if s.prefix_tokens else ""
        source = (
            f"synthetic (~{describe_length(s.input_tokens)} input tokens{prefix}, "
            f"max_tokens {describe_length(s.output_tokens)}, seed {run.seed})"
        )
    lines = [
        "",
        "prompts",
        f"  {source}: {stats.count} prompt{'s' if stats.count != 1 else ''}"
        + (f" x repeat {pc.repeat}" if pc.repeat > 1 else ""),
    ]
    if stats.skipped:
        lines.append(f"  skipped: {stats.skipped} conversations without a human turn and an answer")
    if pc.tokenizer is not None:
        what = "synthetic prompts cut to exactly their tokens; " if pc.synthetic is not None else ""
        lines.append(f"  tokenizer: {pc.tokenizer} ({what}input tokens counted with it, not estimated)")
    if stats.sessions:
        lines.append(
            f"  {stats.sessions} multi-turn session{'s' if stats.sessions != 1 else ''}, {stats.turns} turns "
            "(each turn sent after the answer to the one before, with the whole history)"
        )
    for what, ls in (("input tokens", stats.input_lengths), ("max_tokens", stats.output_lengths)):
        if ls is not None:
            drawn = f" (the first {ls.count:_} prompts)" if ls.count < stats.count else ""
            lines.append(f"  {what}: {fmt_stats(ls)}{drawn}")
    if stats.tags:
        lines.append("  tags: " + ", ".join(sorted(stats.tags)))
    if stats.models_referenced:
        lines.append("  pinned to models by the file: " + ", ".join(sorted(stats.models_referenced)))
    if stats.total_requests is None:
        lines.append(
            f"  requests: cycling through the prompts until the duration ({fmt_duration(run.duration)})"
        )
    else:
        cap = f" (or until {fmt_duration(run.duration)})" if run.duration > 0 else ""
        lines.append(f"  requests: {stats.total_requests}{cap}")
    return lines


def _routing_lines(w: Workload) -> list[str]:
    lines = ["", "routing", f"  strategy {w.routing.strategy}"]
    for i, r in enumerate(w.routing.rules):
        fb = f", fallback {' -> '.join(r.fallback)}" if r.fallback else ""
        lines.append(f"  rule {i}: tag {r.tag!r} -> {', '.join(r.models)}{fb}")
    return lines


def _arrival(w: Workload) -> str:
    """The arrival, or a trace's rows at their timestamps (which replace it)."""
    if w.prompts.format in TRACE_FORMATS:
        return f"the trace's timestamps (x{_fmt_num(w.run.trace_speed)})"
    return w.run.arrival


def _run_lines(w: Workload) -> list[str]:
    """The [run] settings, then retry and where results go."""
    run = w.run
    rate = f"{_fmt_num(run.rate)}/s (burst {run.burst})" if run.rate > 0 else "unlimited"
    conc = (
        f"auto (from {run.concurrency} up to {run.concurrency_max})"
        if run.concurrency_auto
        else run.concurrency
    )
    lines = [
        "",
        "run",
        f"  concurrency {conc}, rate {rate}, arrival {_arrival(w)}, tpm {run.tpm if run.tpm else 'off'}",
        f"  duration {fmt_duration(run.duration) if run.duration else 'none'}, "
        f"timeout {fmt_duration(run.timeout)} per attempt, grace {fmt_duration(run.grace)}, "
        f"stream {'on' if run.stream else 'off'}, seed {run.seed}, workers {run.workers}",
        f"  settled within ±{_fmt_num(100 * run.settle_tolerance)}%"
        + (f", {run.trials} trials in a row (same seed, fresh connections)" if run.trials > 1 else ""),
    ]
    rt = w.retry
    on = sorted((x for x in rt.on if isinstance(x, int)), key=int)
    on_txt = " ".join(str(x) for x in on) + "".join(f" {x}" for x in RETRY_WORDS if x in rt.on)
    if rt.max_attempts == 1:
        lines.append("  retry: off (max_attempts = 1)")
    else:
        lines.append(
            f"  retry: up to {rt.max_attempts} attempts, backoff {fmt_duration(rt.backoff)} "
            f"(max {fmt_duration(rt.backoff_max)}), on {on_txt.strip() or 'nothing'}"
        )
    lines.append(
        f"  results: {fill_results(w.output.results, w.name)}"
        + (" (response text kept)" if w.output.save_text else " (no response text)")
    )
    return lines


def _warnings(w: Workload, stats: PromptStats) -> list[str]:
    """Settings that are valid but look like mistakes (rules that never apply, unused tables, ...)."""
    out = _routing_warnings(w, stats)
    run = w.run
    if run.rate == 0 and run.arrival == "closed" and w.prompts.format not in TRACE_FORMATS:
        out.append(
            f'rate = 0 with arrival = "closed": dispatch is unlimited, bounded only by '
            f"concurrency ({run.concurrency})"
        )
    used = {m.endpoint for m in w.models}
    for name in w.endpoints:
        if name not in used:
            out.append(f"endpoints.{name}: no model uses this endpoint")
    for ep in w.endpoints.values():
        if ep.insecure:
            out.append(f"endpoints.{ep.name}: insecure = true, TLS certificates are not verified")
    for m in w.models:
        if m.weight == 0:
            out.append(
                f"model {m.name!r} has weight 0: it gets traffic only through routing rules and fallbacks"
            )
    out += _sim_warnings(w)
    if run.requests and run.requests < stats.count:
        out.append(
            f"run.requests = {run.requests} sends only the first {run.requests} of {stats.count} prompts"
        )
    if run.duration > 0 and 0 < run.duration < run.timeout:
        out.append("run.duration is shorter than run.timeout")
    return out


def _routing_warnings(w: Workload, stats: PromptStats) -> list[str]:
    out: list[str] = []
    seen_tags: set[str] = set()
    for i, r in enumerate(w.routing.rules):
        if r.tag in seen_tags:
            out.append(
                f"routing.rules.{i}: tag {r.tag!r} is matched by an earlier rule; this rule never applies"
            )
        elif r.tag not in stats.tags:
            out.append(f"routing.rules.{i}: no prompt has tag {r.tag!r}; the rule never applies")
        seen_tags.add(r.tag)
    return out


def _sim_warnings(w: Workload) -> list[str]:
    out: list[str] = []
    if not w.sim:
        return out
    if not any(ep.base_url == "sim" for ep in w.endpoints.values()):
        out.append('[sim.models] profiles are given but no endpoint has base_url = "sim"; they are unused')
    names = [m.name for m in w.models]
    for name in w.sim:
        if name not in names:
            hint = did_you_mean(name, names)
            out.append(
                f"sim.models.{json.dumps(name)}: no model of that name"
                + (f' (did you mean "{hint}"?)' if hint else "")
            )
    return out
