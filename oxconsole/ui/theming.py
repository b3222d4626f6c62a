"""Console themes: TOML files turned into `textual.theme.Theme` objects.

Why this module exists: colours belong to the user, not to the widgets. Widgets and CSS speak only
in theme variables (``$primary``, ``$error``, ...); this module finds the theme files — the ones
shipped inside the package (a copy of ``themes/`` at the repository root) and the user's own in
``platformdirs.user_config_dir("oxconsole")/themes/*.toml`` — validates each, and returns the
themes plus one readable problem per file that would not load, for the app to report once.

A theme file::

    name = "dark"            # required; what --theme takes
    dark = true              # dark or light base (default true)
    primary = "#4aa3ff"      # required
    secondary = "..."        # optional: secondary, accent, foreground, background, surface,
                             #   panel, boost, success, warning, error
    luminosity_spread = 0.15 # optional floats, as textual.theme.Theme
    text_alpha = 0.95
    [variables]              # optional: extra Textual CSS variables, name = value
    "footer-key-foreground" = "#ffb454"
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.app import App
from textual.color import Color, ColorParseError
from textual.theme import Theme

__all__ = [
    "DEFAULT_THEME",
    "PACKAGE_THEMES",
    "ThemeProblem",
    "load_theme_file",
    "load_themes",
    "use_themes",
    "user_theme_dir",
]

DEFAULT_THEME = "dark"
PACKAGE_THEMES = Path(__file__).with_name("themes")
"""The shipped themes (package data; `themes/` at the repository root is the source of truth)."""

_COLOURS = (
    "primary", "secondary", "accent", "foreground", "background", "surface", "panel", "boost",
    "success", "warning", "error",
)  # fmt: skip
_FLOATS = ("luminosity_spread", "text_alpha")
_KEYS = frozenset(("name", "dark", "variables", *_COLOURS, *_FLOATS))


@dataclass(frozen=True)
class ThemeProblem:
    """A theme file that could not be loaded, and why (in the file's own terms)."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class _Bad(Exception):
    pass


def user_theme_dir() -> Path:
    """Where users put their own themes."""
    from platformdirs import user_config_dir

    return Path(user_config_dir("oxconsole")) / "themes"


def _colour(data: dict[str, Any], key: str) -> str | None:
    v = data.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise _Bad(f'{key}: expected a colour string such as "#4aa3ff", got {v!r}')
    try:
        Color.parse(v)
    except ColorParseError:
        raise _Bad(f'{key}: expected a colour such as "#4aa3ff" or "rgb(74,163,255)", got {v!r}') from None
    return v


def load_theme_file(path: Path) -> Theme:
    """One theme file as a Theme; raises ValueError with a one-line reason."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ValueError(f"cannot read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"expected valid TOML, got a syntax error: {e}") from None
    try:
        unknown = sorted(set(data) - _KEYS)
        if unknown:
            raise _Bad(f"{unknown[0]}: unknown key (expected one of {', '.join(sorted(_KEYS))})")
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise _Bad("name: expected a non-empty string")
        dark = data.get("dark", True)
        if not isinstance(dark, bool):
            raise _Bad(f"dark: expected true or false, got {dark!r}")
        colours = {k: _colour(data, k) for k in _COLOURS}
        primary = colours.pop("primary")
        if primary is None:
            raise _Bad("primary: expected a colour, got none")
        floats: dict[str, float] = {}
        for k in _FLOATS:
            if k in data:
                v = data[k]
                if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
                    raise _Bad(f"{k}: expected a number from 0 to 1, got {v!r}")
                floats[k] = float(v)
        variables = data.get("variables", {})
        if not isinstance(variables, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in variables.items()
        ):
            raise _Bad('variables: expected a table of strings ("footer-key-foreground" = "#ffb454")')
    except _Bad as e:
        raise ValueError(str(e)) from None
    kwargs: dict[str, Any] = {k: v for k, v in colours.items() if v is not None}
    kwargs.update(floats)
    return Theme(name=name.strip(), primary=primary, dark=dark, variables=dict(variables), **kwargs)


def _files(folder: Path) -> Iterable[Path]:
    try:
        return sorted(p for p in folder.glob("*.toml") if p.is_file())
    except OSError:
        return ()


def load_themes(extra_dirs: Iterable[Path] | None = None) -> tuple[list[Theme], list[ThemeProblem]]:
    """Shipped themes, then the user's (a user theme with a shipped name replaces it).

    ``extra_dirs`` replaces the user folder (tests pass their own)."""
    dirs = [PACKAGE_THEMES, *(extra_dirs if extra_dirs is not None else [user_theme_dir()])]
    themes: dict[str, Theme] = {}
    problems: list[ThemeProblem] = []
    for folder in dirs:
        for path in _files(folder):
            try:
                theme = load_theme_file(path)
            except ValueError as e:
                problems.append(ThemeProblem(path, str(e)))
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems


def use_themes(app: App[Any], requested: str | None, extra_dirs: Iterable[Path] | None) -> list[str]:
    """Register the shipped and user themes on ``app`` and switch to ``requested`` (else the
    default); what went wrong, one message each, for the app to show once it is up."""
    themes, problems = load_themes(extra_dirs)
    for theme in themes:
        app.register_theme(theme)
    out = [str(p) for p in problems]
    want = requested or DEFAULT_THEME
    if want in app.available_themes:
        app.theme = want
    else:
        known = ", ".join(sorted(app.available_themes))
        out.append(f"unknown theme {want!r}; using {DEFAULT_THEME!r} (available: {known})")
        if DEFAULT_THEME in app.available_themes:
            app.theme = DEFAULT_THEME
    return out
