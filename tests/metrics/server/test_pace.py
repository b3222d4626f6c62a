"""The wait between scrapes."""

from __future__ import annotations

from oxconsole.metrics.server.pace import CPU_BUDGET, MAX_INTERVAL_S, next_interval


def test_a_cheap_scrape_keeps_the_configured_interval() -> None:
    assert next_interval(1.0, 0.0003) == 1.0


def test_an_expensive_scrape_stretches_the_wait_to_the_budget() -> None:
    wait = next_interval(1.0, 0.17)
    assert wait == 0.17 / CPU_BUDGET
    assert 0.17 / wait <= CPU_BUDGET


def test_failures_back_off_up_to_the_longest_interval() -> None:
    assert next_interval(1.0, 0.0, failures=1) == 2.0
    assert next_interval(1.0, 0.0, failures=3) == 8.0
    assert next_interval(1.0, 0.0, failures=50) == MAX_INTERVAL_S
    assert next_interval(90.0, 0.0) == 90.0  # never below what was asked
