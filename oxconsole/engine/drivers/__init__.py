"""Drivers of a run's settings over time, through the coordinator's `apply` as a key does.

`stagedriver` runs `[[stages]]`; `autorun` feeds each finished request to `autosearch`, the
adaptive concurrency controller (`run.concurrency = "auto"`).
"""
