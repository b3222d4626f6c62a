"""The server's side: engines' `/metrics` read into one vocabulary, live and over a run.

Why this package exists: what a serving engine says about itself (requests running and waiting,
KV cache use, prefix-cache hits, its own token rates and latencies) answers the question a tuning
session asks — is the queue in the engine, in the client or in between — and every engine names
it differently. Everything here is pure (no I/O but reading a series file back): the one table of
names (`vocabulary`), a bounded parser of the Prometheus text format (`parse`), two scrapes read
into figures (`scrapes`, `buckets`), the summary's blocks (`spans`), the live gauge (`live`),
the series file's lines (`series`), the pace of scraping (`pace`) and the start-up warning
(`advice`). The scraping itself is the engine's (`engine/serverwatch.py`).
"""
