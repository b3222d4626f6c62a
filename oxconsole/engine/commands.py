"""Commands the console (or a test, or a remote attach) sends to a running engine.

Why this module exists: controls flow to the engine as small immutable objects that can be logged,
serialised across a socket and applied on the engine's own loop, never as direct calls into it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class SetConcurrency:
    value: int


@dataclass(frozen=True)
class SetRate:
    value: float
    """Requests per second; 0 = unlimited."""


@dataclass(frozen=True)
class SetWeight:
    model: str
    value: float


@dataclass(frozen=True)
class EnableModel:
    model: str
    enabled: bool = True


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class Stop:
    cancel: bool = False
    """True: cancel what is in flight at once instead of letting it finish within the grace time."""


Command = SetConcurrency | SetRate | SetWeight | EnableModel | Pause | Resume | Stop

_BY_NAME: dict[str, type[Any]] = {
    "set_concurrency": SetConcurrency,
    "set_rate": SetRate,
    "set_weight": SetWeight,
    "enable_model": EnableModel,
    "pause": Pause,
    "resume": Resume,
    "stop": Stop,
}
_NAME_OF = {v: k for k, v in _BY_NAME.items()}


def command_to_dict(cmd: Command) -> dict[str, Any]:
    return {"cmd": _NAME_OF[type(cmd)], **asdict(cmd)}


def command_from_dict(d: dict[str, Any]) -> Command:
    d = dict(d)
    cls = _BY_NAME[d.pop("cmd")]
    return cls(**d)  # type: ignore[no-any-return]
