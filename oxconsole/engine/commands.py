"""Commands the console (or a test, or a remote attach) sends to a running engine.

Why this module exists: controls flow to the engine as small immutable objects that can be logged,
serialised across a socket and applied on the engine's own loop, never as direct calls into it.
Whether a command's values are ones a run can take is decided in one place, `live.check` (and
`LiveSettings.admit` for the model names); here only the shape of a command read from a dict.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import Any, Literal


class CommandError(ValueError):
    """A command no run could take. The message names the command and says what was expected
    (`set_rate: expected a finite number >= 0 ..., got inf`); nothing was changed."""


@dataclass(frozen=True)
class SetConcurrency:
    value: int


@dataclass(frozen=True)
class SetRate:
    value: float
    """Requests per second; 0 = unlimited."""


@dataclass(frozen=True)
class SetTpm:
    value: float
    """Tokens per minute for the whole run (input + output); 0 = no token budget."""


@dataclass(frozen=True)
class SetWeight:
    model: str
    value: float


@dataclass(frozen=True)
class EnableModel:
    model: str
    enabled: bool = True


@dataclass(frozen=True)
class SetCascade:
    steps: tuple[str, ...]
    """The cascade's models in force, in order (a model left out is a step switched off)."""


@dataclass(frozen=True)
class Pause:
    pass


@dataclass(frozen=True)
class Resume:
    pass


@dataclass(frozen=True)
class SetAuto:
    on: bool
    """True: the engine finds and holds the highest concurrency meeting [slo] (engine/drivers/autosearch.py);
    False: the concurrency stays where it is."""


@dataclass(frozen=True)
class Stop:
    cancel: bool = False
    """True: cancel what is in flight at once instead of letting it finish within the grace time."""


Command = (
    SetConcurrency | SetRate | SetTpm | SetWeight | EnableModel | Pause | Resume | Stop | SetAuto | SetCascade
)

By = Literal["key", "command", "stage", "auto", "agent"]
"""Who made a change (`by` in `changes`): a console key, a control-socket command (a script), a
stage boundary or ramp step (`[[stages]]`), the adaptive-concurrency controller, or an agent
through `oxconsole mcp`. A command travels with its origin beside it (`Engine.apply(cmd, by=...)`),
never inside it."""
BY: tuple[By, ...] = ("key", "command", "stage", "auto", "agent")


def origin(v: object, name: str = "command") -> By:
    """`v` as the origin of a command called `name`, or `CommandError` naming the origins known."""
    for by in BY:
        if v == by:
            return by
    shown = f'"{v}"' if isinstance(v, str) else repr(v)
    raise CommandError(f"{name}: by: expected one of {', '.join(BY)}, got {shown}")


_BY_NAME: dict[str, type[Any]] = {
    "set_concurrency": SetConcurrency,
    "set_rate": SetRate,
    "set_tpm": SetTpm,
    "set_weight": SetWeight,
    "enable_model": EnableModel,
    "pause": Pause,
    "resume": Resume,
    "stop": Stop,
    "set_auto": SetAuto,
    "set_cascade": SetCascade,
}
_NAME_OF = {v: k for k, v in _BY_NAME.items()}


def command_name(cmd: Command) -> str:
    """The command's name on the wire and in error messages (`set_rate`)."""
    return _NAME_OF[type(cmd)]


def command_to_dict(cmd: Command) -> dict[str, Any]:
    return {"cmd": _NAME_OF[type(cmd)], **asdict(cmd)}


def command_from_dict(d: dict[str, Any]) -> Command:
    """The command a dict names, with exactly its fields (those with a default may be left out).

    Raises `CommandError` for an unknown command, a missing or unknown field. The values are not
    judged here: `LiveSettings.admit` does that before anything changes. A `by` beside the fields
    (who sent it, `origin`) is checked and left out: it is not part of the command.
    """
    d = dict(d)
    name = d.pop("cmd", None)
    cls = _BY_NAME.get(name) if isinstance(name, str) else None
    if cls is None:
        shown = f'"{name}"' if isinstance(name, str) else repr(name)
        raise CommandError(f"unknown command {shown} (known: {', '.join(_BY_NAME)})")
    if "by" in d:
        origin(d.pop("by"), str(name))
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    for key in d:
        if key not in names:
            known = ", ".join(sorted(names)) or "none"
            raise CommandError(f'{name}: unknown field "{key}" (fields: {known})')
    for f in fields:
        no_default = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if no_default and f.name not in d:
            raise CommandError(f'{name}: missing field "{f.name}"')
    return cls(**d)  # type: ignore[no-any-return]
