"""What-if price plans (`[plans.NAME]`): the tables validated into `PricePlan`s (schema.py), and back.

Why this module exists: a run is billed at its models' own prices; a plan says what the very same
traffic would cost elsewhere (a flat price per request, or per million tokens, per model or by
default). The workload, `oxconsole report --plans FILE` and the journal's manifest all read plans
through `parse_plans`, so a plan means the same wherever it comes from, and its errors read like
every other workload error (all at once, key named, exit 2).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from oxconsole.base.units import fmt_decimal
from oxconsole.workload import bounds as b
from oxconsole.workload.problems import Problems, did_you_mean, join_key, show
from oxconsole.workload.schema import PricePlan, Prices, toml_keys
from oxconsole.workload.values import Table

__all__ = ["PricePlan", "Prices", "describe_plans", "parse_plans", "plans_to_toml"]

_PLAN = toml_keys(PricePlan, "name")
_PRICES = toml_keys(Prices)
_WHY = " (a price per request, per million tokens, per image, per audio minute or per million characters)"


def parse_plans(errs: Problems, data: Any, models: Collection[str] | None) -> dict[str, PricePlan]:
    """The `[plans]` table (the document's "plans" value) as plans by name, in file order.

    `models`: the names a model override may use (None: not checked). Errors go to `errs` with
    paths such as `plans.flat.default.per_request`; a plan with an error is left out.
    """
    if data is None:
        return {}
    if not isinstance(data, dict):
        errs.bad("plans", "tables [plans.NAME] (such as [plans.request-based])", data)
        return {}
    out: dict[str, PricePlan] = {}
    for name, value in data.items():
        path = join_key("plans", name)
        if not b.is_safe_name(name):
            errs.add(path, f"a plan name: {b.NAME_RULE}", show(name))
            continue
        plan = _plan(errs, value, path, name, models)
        if plan is not None:
            out[name] = plan
    return out


def _plan(
    errs: Problems, value: Any, path: str, name: str, models: Collection[str] | None
) -> PricePlan | None:
    t = Table(errs, value, path, _PLAN, "a [plans.NAME] table")
    if t.broken:
        return None
    if not t.has("default") and not t.has("models"):
        errs.add(
            path, "default = { per_request, per_1m_input, per_1m_output } and/or models", "an empty plan"
        )
        return None
    default = _prices(errs, t.data["default"], t.p("default"), Prices()) if t.has("default") else Prices()
    overrides: dict[str, Prices] = {}
    if t.has("models"):
        table = t.data["models"]
        if not isinstance(table, dict):
            t.fail("models", 'a table of model prices (models."NAME" = { per_1m_input = ... })')
        else:
            for model, v in table.items():
                mpath = join_key(t.p("models"), model)
                if models is not None and model not in models:
                    hint = did_you_mean(model, models)
                    known = f' (did you mean "{hint}"?)' if hint else f" (defined: {', '.join(models)})"
                    errs.add(mpath, "the name of a model in [[models]]" + known, "no such model")
                    continue
                overrides[model] = _prices(errs, v, mpath, default)
    return PricePlan(name=name, default=default, models=overrides)


def _prices(errs: Problems, value: Any, path: str, base: Prices) -> Prices:
    """A price table; each key left out takes `base`'s value."""
    t = Table(errs, value, path, _PRICES, "a price table")
    return Prices(
        per_request=t.num("per_request", base.per_request, b.MAX_PRICE, _WHY),
        per_1m_input=t.num("per_1m_input", base.per_1m_input, b.MAX_PRICE, _WHY),
        per_1m_output=t.num("per_1m_output", base.per_1m_output, b.MAX_PRICE, _WHY),
        per_1m_cached_input=t.num("per_1m_cached_input", 0.0, b.MAX_PRICE, _WHY)
        if t.has("per_1m_cached_input")
        else base.per_1m_cached_input,
        per_image=t.num("per_image", base.per_image, b.MAX_PRICE, _WHY),
        per_audio_minute=t.num("per_audio_minute", base.per_audio_minute, b.MAX_PRICE, _WHY),
        per_1m_characters=t.num("per_1m_characters", base.per_1m_characters, b.MAX_PRICE, _WHY),
    )


def _price_table(p: Prices) -> dict[str, float]:
    out = {"per_request": p.per_request, "per_1m_input": p.per_1m_input, "per_1m_output": p.per_1m_output}
    if p.per_1m_cached_input is not None:
        out["per_1m_cached_input"] = p.per_1m_cached_input
    for key in _MEDIA_PRICES:  # written only when set: a manifest of a text run keeps its shape
        if v := getattr(p, key):
            out[key] = v
    return out


_MEDIA_PRICES = ("per_image", "per_audio_minute", "per_1m_characters")


def plans_to_toml(plans: Mapping[str, PricePlan]) -> dict[str, Any]:
    """The plans as the `[plans]` table they read from (every price written out): what the journal's
    manifest keeps, read back with `parse_plans` to the same plans."""
    return {
        name: {
            "default": _price_table(p.default),
            "models": {m: _price_table(x) for m, x in p.models.items()},
        }
        for name, p in plans.items()
    }


def _price_words(p: Prices) -> str:
    return ", ".join(f"{fmt_decimal(v)} per {what}" for v, what in p.given()) or "free"


def describe_plans(plans: Mapping[str, PricePlan]) -> list[str]:
    """What `oxconsole validate` says of the plans: each plan's default and model prices."""
    if not plans:
        return []
    lines = ["", "price plans (what-ifs; the models' own prices stay the actual cost)"]
    for name, p in plans.items():
        lines.append(f"  {name}: {_price_words(p.default)}")
        lines += [f"    {m}: {_price_words(x)}" for m, x in p.models.items()]
    return lines
