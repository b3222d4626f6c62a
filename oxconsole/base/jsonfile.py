"""Writing a JSON file so that a reader never sees half of it.

Why this module exists: summaries, a sweep's table and a run's registry entry are read while
they are written (by `report`, `ps`, a script); every writer shares this one rename. It sits at
the bottom, beside the other utilities, so the control socket needs nothing of getting a run ready.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["write_json"]


def write_json(path: Path, data: object, *, private: bool = False) -> None:
    """Write `data` as JSON so that a reader never sees half a file (a temporary file beside it,
    then a rename).

    Default: indented with a final newline (summaries, read by people), missing folders created.
    `private` (a run's registry entry): one compact line, mode 0600, and the folder must exist
    already (a folder made here would not be owner-only). A `--summary-json` of `-` or
    /dev/stdout is not a path for this (see `oxconsole.reports.outputs.SUMMARY_STREAMS`).
    """
    import orjson

    if private:
        body, mode = orjson.dumps(data), 0o600
    else:
        body, mode = orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n", 0o666
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with open(fd, "wb") as f:
        f.write(body)
    os.replace(tmp, path)
