"""Which model a request goes to: routing strategies, tag rules, live weights and enable/disable.

Why this module exists: routing is pure, seeded logic that the console changes live (weights,
disabled models) and tests check statistically; it keeps no I/O and no clock.

Weights are relative shares. Every weight is a finite number >= 0 (`set_weight` and the constructor
refuse anything else), and a draw divides them by the largest first, so any finite weights, even
1e308 on several models whose plain sum would overflow to inf, give their shares.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Sequence

from oxconsole.workload import ModelConfig, Prompt, RoutingConfig, RoutingRule


class NoModelAvailable(Exception):
    """Every candidate model is disabled or has weight 0."""


class Router:
    def __init__(self, models: Sequence[ModelConfig], routing: RoutingConfig, seed: int = 1) -> None:
        self.names: list[str] = [m.name for m in models]
        self.weights: dict[str, float] = {m.name: _weight(m.weight) for m in models}
        self.enabled: dict[str, bool] = {m.name: True for m in models}
        self.in_flight: dict[str, int] = {m.name: 0 for m in models}
        self.cooled: dict[str, bool] = {m.name: False for m in models}
        self.strategy = routing.strategy
        self.rules: tuple[RoutingRule, ...] = routing.rules
        self.cascade: list[str] = list(routing.cascade)
        """`[routing] cascade`'s steps in force, in order (changed live); [] = no cascade."""
        self._rng = random.Random(seed)
        self._rr = itertools.count()
        self._cum_cache: dict[tuple[str | bool, ...], tuple[list[str], list[float]]] = {}

    # --- live changes -------------------------------------------------------------------------
    def set_weight(self, model: str, weight: float) -> None:
        if model not in self.weights:
            raise KeyError(model)
        self.weights[model] = _weight(weight)
        self._cum_cache.clear()

    def set_enabled(self, model: str, enabled: bool) -> None:
        if model not in self.enabled:
            raise KeyError(model)
        self.enabled[model] = enabled
        self._cum_cache.clear()

    def set_cascade(self, steps: Sequence[str]) -> None:
        """The cascade's steps from now on, in order (a request on a step left out stands there)."""
        for m in steps:
            if m not in self.enabled:
                raise KeyError(m)
        self.cascade = list(steps)

    def set_cooled(self, model: str, cooled: bool) -> None:
        self.cooled[model] = cooled
        self._cum_cache.clear()

    def available(self, model: str) -> bool:
        return self.enabled[model] and not self.cooled[model]

    def any_available(self) -> bool:
        return any(self.available(n) and self.weights[n] > 0 for n in self.names)

    # --- choosing -----------------------------------------------------------------------------
    def rule_for(self, prompt: Prompt) -> RoutingRule | None:
        if prompt.tag is None:
            return None
        for rule in self.rules:
            if rule.tag == prompt.tag:
                return rule
        return None

    def pick(self, prompt: Prompt) -> str:
        """The model for a new request; raises NoModelAvailable when nothing can take it."""
        if prompt.model is not None and prompt.model in self.enabled and self.enabled[prompt.model]:
            return prompt.model
        rule = self.rule_for(prompt)
        if rule is not None:
            try:
                return self._choose(rule.models, in_rule=True)
            except NoModelAvailable:
                for fb in rule.fallback:
                    if self.available(fb):
                        return fb
        if self.cascade:
            steps = self.steps()
            if steps:
                return steps[0]
        return self._choose(self.names)

    def shares(self) -> dict[str, float]:
        """Each model's share of the requests the general draw sends now (a cascade: all to its
        first step); tag rules and prompts pinned to a model are left out."""
        steps = self.steps() if self.cascade else []
        if steps:
            return {steps[0]: 1.0}
        try:
            cands = self._candidates(self.names, in_rule=False)
        except NoModelAvailable:
            return {}
        total = sum(self.weights[n] for n in cands)
        if self.strategy == "round_robin" or total <= 0:
            return dict.fromkeys(cands, 1.0 / len(cands))
        return {n: self.weights[n] / total for n in cands}

    def steps(self) -> list[str]:
        """The cascade's steps a request may be sent to now, in order."""
        return [m for m in self.cascade if self.enabled[m]]

    def next_step(self, model: str, tried: Sequence[str]) -> str | None:
        """The cascade's next step after `model` (not tried yet), or None: `model` is the last one
        or not in the cascade (a rule or a pin sent it there), and its answer stands."""
        if model not in self.cascade:
            return None
        after = self.cascade[self.cascade.index(model) + 1 :]
        for m in after:
            if self.enabled[m] and m not in tried:
                return m
        return None

    def fallbacks(self, prompt: Prompt, tried: Sequence[str]) -> list[str]:
        """Models to try, in order, after a request failed on every model in `tried`."""
        rule = self.rule_for(prompt)
        if rule is None:
            return []
        return [m for m in rule.fallback if m not in tried and self.enabled.get(m, False)]

    def _candidates(self, names: Sequence[str], in_rule: bool) -> list[str]:
        cands = [n for n in names if self.available(n) and self.weights[n] > 0]
        if not cands:
            # A cooled-down model is still better than nothing: fall back to enabled ones.
            cands = [n for n in names if self.enabled[n] and self.weights[n] > 0]
        if not cands and in_rule:
            # A rule's own list: naming a model there routes to it even at global weight 0
            # (weight 0 keeps a model out of the general traffic, e.g. one kept for a tag).
            cands = [n for n in names if self.available(n)] or [n for n in names if self.enabled[n]]
        if not cands:
            raise NoModelAvailable
        return cands

    def _choose(self, names: Sequence[str], in_rule: bool = False) -> str:
        if self.strategy == "round_robin":
            cands = self._candidates(names, in_rule)
            return cands[next(self._rr) % len(cands)]
        if self.strategy == "least_loaded":
            cands = self._candidates(names, in_rule)
            # Fewest in flight relative to weight; ties go to the earlier model. A rule's models
            # all at weight 0 count as equal weights, as in a weighted draw.
            return min(cands, key=lambda n: self.in_flight[n] / (self.weights[n] or 1.0))
        key: tuple[str | bool, ...] = (*names, in_rule)
        cached = self._cum_cache.get(key)
        if cached is None:
            cands = self._candidates(names, in_rule)
            cached = self._cum_cache[key] = (cands, self._cumulative(cands))
        cands, cum = cached
        if len(cands) == 1:
            return cands[0]
        x = self._rng.random() * cum[-1]
        # x < cum[-1] but for rounding; never past the last model.
        return cands[min(bisect.bisect_right(cum, x), len(cands) - 1)]

    def _cumulative(self, cands: Sequence[str]) -> list[float]:
        """Running sums of the candidates' shares, each weight over the largest (so each share is
        at most 1 and the sum at most len(cands), finite whatever the weights); all 0 = equal."""
        top = max(self.weights[n] for n in cands)
        if top <= 0:
            return [float(i) for i in range(1, len(cands) + 1)]
        return list(itertools.accumulate(self.weights[n] / top for n in cands))


def _weight(weight: float) -> float:
    """A weight as the router keeps it; ValueError for one no draw could use (< 0, inf, nan)."""
    value = float(weight)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"weight must be a finite number >= 0, got {weight!r}")
    return value
