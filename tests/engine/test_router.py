"""Routing strategies, rules, live weights and disabled models (pure, seeded)."""

from __future__ import annotations

from collections import Counter

import pytest

from oxconsole.engine.router import NoModelAvailable, Router
from oxconsole.workload import ModelConfig, Prompt, RoutingConfig, RoutingRule

MODELS = (ModelConfig("a", weight=3), ModelConfig("b", weight=1), ModelConfig("c", weight=0))


def P(tag: str | None = None, model: str | None = None) -> Prompt:
    return Prompt(id="x", messages=[{"role": "user", "content": "hi"}], tag=tag, model=model)


def test_weighted_shares_follow_weights_and_change_live() -> None:
    r = Router(MODELS, RoutingConfig(), seed=1)
    n = 20000
    c = Counter(r.pick(P()) for _ in range(n))
    assert c["c"] == 0
    assert c["a"] / n == pytest.approx(0.75, abs=0.015)
    r.set_weight("c", 4)
    c = Counter(r.pick(P()) for _ in range(n))
    assert c["c"] / n == pytest.approx(0.5, abs=0.015)
    assert c["b"] / n == pytest.approx(0.125, abs=0.01)


def test_weighted_is_reproducible_for_a_seed() -> None:
    r1, r2, r3 = (Router(MODELS, RoutingConfig(), seed=s) for s in (5, 5, 6))
    s1 = [r1.pick(P()) for _ in range(200)]
    assert s1 == [r2.pick(P()) for _ in range(200)]
    assert s1 != [r3.pick(P()) for _ in range(200)]
    # the seeded sequence is still the weighted one: 3:1:0 (binomial, 200 draws: 150 +- 4 sigma)
    counts = Counter(s1)
    assert counts["c"] == 0
    assert 125 <= counts["a"] <= 175, counts


def test_disabled_model_gets_nothing_and_all_disabled_raises() -> None:
    r = Router(MODELS, RoutingConfig(), seed=1)
    r.set_enabled("a", False)
    assert {r.pick(P()) for _ in range(500)} == {"b"}
    r.set_enabled("b", False)
    with pytest.raises(NoModelAvailable):
        r.pick(P())
    assert not r.any_available()


def test_round_robin_and_least_loaded() -> None:
    r = Router(MODELS, RoutingConfig(strategy="round_robin"), seed=1)
    assert [r.pick(P()) for _ in range(4)] == ["a", "b", "a", "b"]
    r = Router(MODELS, RoutingConfig(strategy="least_loaded"), seed=1)
    r.in_flight.update(a=6, b=1)  # per unit of weight: a 2.0, b 1.0
    assert r.pick(P()) == "b"
    r.in_flight.update(a=2, b=1)  # a 0.67 < b 1.0
    assert r.pick(P()) == "a"


def test_rules_by_tag_fallbacks_and_pinned_model() -> None:
    rules = (RoutingRule(tag="classify", models=("b",), fallback=("a",)),)
    r = Router(MODELS, RoutingConfig(rules=rules), seed=1)
    assert {r.pick(P("classify")) for _ in range(200)} == {"b"}
    assert r.fallbacks(P("classify"), ["b"]) == ["a"]
    assert r.fallbacks(P("other"), ["a"]) == []
    r.set_enabled("b", False)
    assert r.pick(P("classify")) == "a"  # the rule's models are off: its fallback takes it
    assert r.pick(P(model="c")) == "c"  # a prompt's own model wins, even at weight 0
