"""Bad input and exit codes: what every command turns a user's mistake into.

Why this module exists: the command line, the engine process, `sweep` and `attach` must turn the
same mistakes into the same message and the same exit code. It imports nothing of the package, so
the fast commands stay fast.
"""

from __future__ import annotations

import argparse
import sys

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_ERRORS",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_SAVED",
    "EXIT_OK",
    "BadInput",
    "Parser",
]

EXIT_OK, EXIT_ERRORS, EXIT_BAD_INPUT, EXIT_NOT_SAVED, EXIT_INTERRUPTED = 0, 1, 2, 4, 130
"""Every request ok; some ended in error; bad input (no traceback); results could not be saved
(the journal or the summary); stopped before every request was sent. Precedence 2, 4, 130, 3, 1, 0
(`RunOutcome.exit_code` decides a run's)."""


class BadInput(Exception):
    """A user error: printed as one paragraph, exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse with usage errors as bad input: the usage line, one message, exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)
