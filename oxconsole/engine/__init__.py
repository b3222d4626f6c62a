"""The run: arrival schedule -> router -> limits (rate bucket, slots, token budget) -> client
(openai SDK, our own stream reading) -> retry and fallback -> journal and metrics.

Nothing here imports Textual or anything above it (the control socket, the console, the command
line); it is driven by commands and read through snapshots.
"""
