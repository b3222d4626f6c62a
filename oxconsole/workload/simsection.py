"""The `[sim]` table: the embedded simulator's model profiles, validated like every other section.

Why this module exists: the simulator's profile has more keys than any other table (timings, load
curve, fault rates), and two readers: a workload's `[sim]` (`sections.build_workload`) and
`oxconsole sim --config FILE` (`load.load_sim_section`). Its rules live here, apart from the
sections that describe the run.
"""

from __future__ import annotations

from typing import Any

from oxconsole.workload import bounds as b
from oxconsole.workload.problems import Problems, join_key
from oxconsole.workload.schema import toml_keys
from oxconsole.workload.simschema import METRICS_FORMATS, REASONING_FIELDS, SimLimits, SimModelProfile
from oxconsole.workload.values import Table, is_num

__all__ = ["parse_sim", "parse_sim_limits", "parse_sim_profiles", "parse_sim_section"]

_SIM = ("models", *toml_keys(SimLimits, "window"), "ratelimit_window")  # window: ratelimit_window
_PROFILE = toml_keys(SimModelProfile)


def parse_sim_profiles(table: Any, file_label: str) -> dict[str, SimModelProfile]:
    """Validate a `[sim]` table (the value of the document's "sim" key) into profiles by model name.

    Shared by `load_workload` and `load_sim_section`; error paths read `sim.models."NAME".key`.
    Raises WorkloadError listing every error.
    """
    errs = Problems(file_label)
    out = parse_sim(errs, table)
    errs.raise_if_any({"sim": table})
    return out


def parse_sim(errs: Problems, table: Any) -> dict[str, SimModelProfile]:
    return parse_sim_section(errs, table)[0]


def parse_sim_limits(table: Any, file_label: str) -> SimLimits:
    """The `[sim]` table's rate limits alone (`oxconsole sim --config`); raises WorkloadError."""
    errs = Problems(file_label)
    out = parse_sim_section(errs, table)[1]
    errs.raise_if_any({"sim": table})
    return out


def parse_sim_section(errs: Problems, table: Any) -> tuple[dict[str, SimModelProfile], SimLimits]:
    """The `[sim]` table: its model profiles and its server-wide rate limits."""
    t = Table(errs, table, "sim", _SIM, "[sim]")
    limits = SimLimits(
        rpm_limit=t.int_("rpm_limit", 0, 0, b.MAX_COUNT, " (requests per minute; 0 = no limit)"),
        tpm_limit=t.int_("tpm_limit", 0, 0, b.MAX_COUNT, " (tokens per minute; 0 = no limit)"),
        window=t.duration("ratelimit_window", 60.0, positive=True),
        metrics_format=t.enum("metrics_format", "vllm", METRICS_FORMATS),
    )
    return _parse_models(errs, t), limits


def _parse_models(errs: Problems, t: Table) -> dict[str, SimModelProfile]:
    if not t.has("models"):
        return {}
    models = t.data["models"]
    if not isinstance(models, dict):
        errs.bad("sim.models", 'tables [sim.models."NAME"]', models)
        return {}
    out: dict[str, SimModelProfile] = {}
    for name, value in models.items():
        p = Table(errs, value, join_key("sim.models", name), _PROFILE, 'a [sim.models."NAME"] table')
        if not p.broken:
            out[name] = _sim_profile(p)
    return out


def _sim_profile(p: Table) -> SimModelProfile:
    d = SimModelProfile()
    return SimModelProfile(
        ttft=p.duration("ttft", d.ttft),
        tokens_per_s=p.num("tokens_per_s", d.tokens_per_s, b.MAX_TOKENS_PER_S, " (tokens per second)"),
        output_tokens=p.int_("output_tokens", d.output_tokens, 1, b.MAX_TOKENS, " (tokens)"),
        capacity=p.int_("capacity", d.capacity, 1, b.MAX_CONCURRENCY, " (requests served at once)"),
        jitter=p.num("jitter", d.jitter, 1.0),
        error_rate=p.num("error_rate", d.error_rate, 1.0),
        rate_limit=p.num("rate_limit", d.rate_limit, b.MAX_RATE, " (requests per second; 0 = no limit)"),
        retry_after=p.duration("retry_after", d.retry_after),
        throttle_rate=p.num("throttle_rate", d.throttle_rate, 1.0),
        reset_rate=p.num("reset_rate", d.reset_rate, 1.0),
        abort_rate=p.num("abort_rate", d.abort_rate, 1.0),
        malformed_rate=p.num("malformed_rate", d.malformed_rate, 1.0),
        stall_rate=p.num("stall_rate", d.stall_rate, 1.0),
        stall=p.duration("stall", d.stall),
        usage=p.bool_("usage", d.usage),
        pack_error_rate=p.num("pack_error_rate", d.pack_error_rate, 1.0),
        knee=p.num("knee", d.knee, b.MAX_CONCURRENCY, " (requests in service; 0 = no load curve)"),
        knee_power=_knee_power(p, d.knee_power),
        reasoning_tokens=p.int_("reasoning_tokens", d.reasoning_tokens, 0, b.MAX_TOKENS, " (tokens)"),
        reasoning_field=_reasoning_field(p, d.reasoning_field),
        prefix_cache=p.bool_("prefix_cache", d.prefix_cache),
        cache_block=p.int_("cache_block", d.cache_block, 1, b.MAX_TOKENS, " (tokens per block)"),
        prefill_tokens_per_s=p.num(
            "prefill_tokens_per_s",
            d.prefill_tokens_per_s,
            b.MAX_TOKENS_PER_S,
            " (tokens per second; 0 = instant)",
        ),
        quality=p.opt_num("quality", 1.0),
        replicas=p.int_("replicas", d.replicas, 1, b.MAX_CONCURRENCY, " (replicas ready at the start)"),
        max_replicas=_max_replicas(p, d.max_replicas),
        cold_start=p.duration("cold_start", d.cold_start),
        rtf=p.num("rtf", d.rtf, _MAX_RTF, " (seconds of work per second of audio)"),
        audio_rtf=p.num("audio_rtf", d.audio_rtf, _MAX_RTF, " (seconds of work per second of audio)"),
        image_s=p.duration("image_s", d.image_s),
        image_tokens=p.int_("image_tokens", d.image_tokens, 0, b.MAX_TOKENS, " (tokens per image)"),
        kv_tokens=p.int_("kv_tokens", d.kv_tokens, 1, b.MAX_COUNT, " (tokens of KV cache per replica)"),
    )


_MAX_RTF = 1000.0
"""The slowest real-time factor a simulated model may have (a 10 s clip would take 2.8 hours)."""


def _max_replicas(p: Table, default: int) -> int:
    """`max_replicas`: 0 (no scaling) or at least `replicas`."""
    v = p.int_("max_replicas", default, 0, b.MAX_CONCURRENCY, " (replicas; 0 = no scaling)")
    start = p.data.get("replicas", 1)
    if v and isinstance(start, int) and not isinstance(start, bool) and v < start:
        p.fail("max_replicas", f"0 or an integer >= replicas ({start})")
        return default
    return v


def _reasoning_field(p: Table, default: str) -> str:
    """`reasoning_field`: one of `REASONING_FIELDS`."""
    if not p.has("reasoning_field"):
        return default
    v = p.data["reasoning_field"]
    if v not in REASONING_FIELDS:
        p.fail("reasoning_field", " or ".join(f'"{f}"' for f in REASONING_FIELDS))
        return default
    return str(v)


def _knee_power(p: Table, default: float) -> float:
    """`knee_power`: a number between 0.5 and 8 (the load curve's steepness)."""
    if not p.has("knee_power"):
        return default
    v = p.data["knee_power"]
    if not is_num(v) or not 0.5 <= v <= 8.0:
        p.fail("knee_power", "a number between 0.5 and 8 (the load curve's steepness)")
        return default
    return float(v)
