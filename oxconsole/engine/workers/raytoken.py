"""Ray's token authentication, so that a run neither changes the user's other clusters nor fails
to join one that wants a token.

Why this module exists: Ray 2.60 turns token authentication on for every cluster `ray.init()`
starts here, and, when no token is at hand, writes one to `~/.ray/auth_token`; from then on every
`ray start --head` on the machine finds that file and wants the token, and a driver that joins it
by address without `RAY_AUTH_MODE=token` fails with only "Failed to connect". So a local start is
given a token in the environment alone (inherited by the processes it starts, written nowhere),
and a join that failed is tried once more in token mode when a token is at hand. Ray's own names
for this (its environment variables, its config refresh) are kept here, in one place.
"""

from __future__ import annotations

import importlib
import os
import secrets
from pathlib import Path

__all__ = ["local_start_token", "retry_in_token_mode", "token_at_hand"]

MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
PATH_ENV = "RAY_AUTH_TOKEN_PATH"


def default_token_path() -> Path:
    """Where Ray looks for a token when no variable names one (and where its local start writes one)."""
    return Path.home() / ".ray" / "auth_token"


def token_at_hand() -> bool:
    """A token Ray would find: `RAY_AUTH_TOKEN`, the file `RAY_AUTH_TOKEN_PATH` names, or
    `~/.ray/auth_token` (non-empty)."""
    if os.environ.get(TOKEN_ENV, "").strip():
        return True
    named = os.environ.get(PATH_ENV, "").strip()
    path = Path(named).expanduser() if named else default_token_path()
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def local_start_token() -> None:
    """Before `ray.init(address="local")`: when Ray would turn token authentication on and write
    a new token to `~/.ray/auth_token` (no mode chosen, no token at hand), give it a fresh one in
    `RAY_AUTH_TOKEN` instead: the local cluster and its processes use it, and no file is left to
    turn token authentication on for the user's next `ray start --head`."""
    if os.environ.get(MODE_ENV) is not None or token_at_hand():
        return
    os.environ[TOKEN_ENV] = secrets.token_hex(32)  # as Ray's own generator: 256 bits


def retry_in_token_mode(error: BaseException) -> bool:
    """After a join by address failed: True when it may have failed for want of token mode (Ray
    says only that it could not connect), no mode was chosen and a token is at hand; then token
    mode is on for this process (and the processes it starts), and the join should be tried again."""
    if os.environ.get(MODE_ENV) is not None or not token_at_hand():
        return False
    text = str(error).lower()
    if "failed to connect" not in text and "auth" not in text:
        return False
    os.environ[MODE_ENV] = "token"
    try:  # Ray reads the mode into its cached config; refresh it as its own enabling does
        importlib.import_module("ray._raylet").Config.initialize("")
    except (ImportError, AttributeError):
        pass
    return True
