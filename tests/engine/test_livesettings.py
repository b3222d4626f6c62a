"""LiveSettings: what each live command changes, decided once for the engine and the worker pool."""

from __future__ import annotations

import pytest

from oxconsole.engine.commands import (
    CommandError,
    EnableModel,
    Pause,
    Resume,
    SetConcurrency,
    SetRate,
    SetTpm,
    SetWeight,
    Stop,
)
from oxconsole.engine.livesettings import Change, LiveSettings


def settings() -> LiveSettings:
    return LiveSettings(concurrency=8, rate=0.0, weights={"a": 1.0, "b": 2.0})


def test_each_command_changes_its_setting_once() -> None:
    s = settings()
    assert s.apply(SetConcurrency(12)) == [Change("concurrency", 8, 12)]
    assert s.apply(SetConcurrency(12)) == []  # the same value again: nothing to log
    assert s.apply(SetRate(40)) == [Change("rate", 0.0, 40.0)]
    assert s.apply(SetWeight("b", 3)) == [Change("weight", 2.0, 3.0, "b")]
    assert s.apply(EnableModel("a", False)) == [Change("enabled", True, False, "a")]
    assert s.apply(EnableModel("a", False)) == []
    assert s.apply(Pause()) == [Change("paused", False, True)]
    assert s.apply(Pause()) == []
    assert s.apply(Resume()) == [Change("paused", True, False)]
    assert s.apply(Resume()) == []
    assert (s.concurrency, s.rate, s.weights, s.enabled, s.paused) == (
        12,
        40.0,
        {"a": 1.0, "b": 3.0},
        {"a": False, "b": True},
        False,
    )


def test_values_are_typed_as_logged() -> None:
    s = settings()
    (c,) = s.apply(SetRate(7))
    assert isinstance(c.new, float)
    (c,) = s.apply(SetWeight("a", 2))
    assert c == Change("weight", 1.0, 2.0, "a") and isinstance(c.new, float)
    (c,) = s.apply(SetTpm(9000))
    assert c == Change("tpm", 0.0, 9000.0) and isinstance(c.new, float)


def test_out_of_range_values_and_unknown_models_are_refused_and_change_nothing() -> None:
    # (they used to be clamped or dropped silently: concurrency 0 became 1, a negative rate
    # unlimited, an unknown model a no-op; tests/engine/test_commands_validation.py has every case)
    s = settings()
    for cmd in (
        SetConcurrency(0),
        SetRate(-5),
        SetWeight("nope", 1),
        SetWeight("a", -1),
        EnableModel("nope"),
    ):
        with pytest.raises(CommandError):
            s.apply(cmd)
    assert (s.concurrency, s.rate, s.weights, s.enabled) == (
        8,
        0.0,
        {"a": 1.0, "b": 2.0},
        {"a": True, "b": True},
    )


def test_stop_is_not_a_setting_and_ends_pause_and_resume() -> None:
    s = settings()
    assert s.apply(Pause()) == [Change("paused", False, True)]
    assert s.apply(Stop()) == []
    s.stopping()
    assert s.apply(Resume()) == []  # a stopping run drains; resuming it means nothing
    assert s.apply(Pause()) == []
    assert s.apply(SetConcurrency(2)) == [Change("concurrency", 8, 2)]  # limits still apply


def test_a_change_names_the_command_that_sets_it() -> None:
    s = settings()
    for cmd in (
        SetConcurrency(3),
        SetRate(2.5),
        SetTpm(1200.0),
        SetWeight("a", 4.0),
        EnableModel("b", False),
        Pause(),
        Resume(),
    ):
        (c,) = s.apply(cmd)
        assert c.command() == cmd
