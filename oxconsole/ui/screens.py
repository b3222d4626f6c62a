"""Modal screens: the help screen (`?`) and the routing editor (`w`).

Why this module exists: both are small, self-contained forms over the main screen. The routing
editor never talks to the engine: it is given the models' current weights and states, and it
dismisses with the list of commands that would make the edits true; the app sends them. That keeps
"what the user asked" testable apart from "how it reaches the run".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Static

from oxconsole.base.safetext import shown
from oxconsole.base.units import fmt_weight
from oxconsole.engine.commands import Command, EnableModel, SetCascade, SetWeight
from oxconsole.metrics.snapshot import Snapshot

__all__ = [
    "KEYS",
    "ConfirmStop",
    "EnabledBox",
    "FilterPrompt",
    "HelpScreen",
    "ModelRoute",
    "RoutingEditor",
    "keys_of",
    "routes_of",
    "routing_words",
]

KEYS: tuple[tuple[str, str], ...] = (
    ("+ / -", "concurrency up / down by 10% (at least 1; turns auto off)"),
    ("a", "auto concurrency on / off: hold the highest concurrency meeting [slo]"),
    ("] / [", "rate up / down by 10% (from unlimited: from the achieved rate)"),
    ("0", "toggle unlimited rate (remembers the previous rate)"),
    ("} / {", "token budget (tpm) up / down by 10% (from off: tokens sent a minute)"),
    ("w", "routing editor: each model's weight, enable / disable"),
    ("space", "pause / resume dispatch (requests in flight finish)"),
    ("s", "save the tuned workload as NAME.tuned.toml beside the original"),
    ("d", "detach: close the console, the run goes on (oxconsole attach)"),
    ("q", "stop: finish what is in flight (again: cancel it), exit; ctrl+c too"),
    ("Q", "stop, asked first (y confirms), from any console"),
    ("h", "latency histogram: next metric (TTFT, inter-token, end-to-end, queue)"),
    ("r", "latency histogram: last 10 s / whole run"),
    ("t", "next tab (compact layout: models, latency, errors, phase, ...)"),
    ("/", "filter the models and errors tables by a part of a name; esc clears"),
    ("?", "this help"),
    (": / ctrl+p", "command palette: every action by name (tabs too), and the theme"),
)
"""Every key of the console, in the order the help screen lists them."""

ATTACHED_Q = "close the console, the run goes on (as d); ctrl+c too. Q stops the run"
"""What `q` does in a console opened with `oxconsole attach` (a viewer: q must not end a run)."""


def keys_of(attached: bool) -> tuple[tuple[str, str], ...]:
    """The help screen's keys for a console that started its run, or one `attached` to it."""
    if not attached:
        return KEYS
    return tuple((key, ATTACHED_Q if key == "q" else what) for key, what in KEYS)


def dialog_css(screen: str, box: str, width: int) -> str:
    """A modal screen's box (its one `box` child) centred over the main screen, `width` wide and
    as tall as it needs, within the terminal (the first rules of each screen here)."""
    return f"""
    {screen} {{
        align: center middle;
    }}
    {screen} > {box} {{
        width: {width};
        max-width: 100%;
        height: auto;
        max-height: 100%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }}"""


class HelpScreen(ModalScreen[None]):
    """Every key and what it does; any of escape, ?, q closes it."""

    DEFAULT_CSS = (
        dialog_css("HelpScreen", "VerticalScroll", 86)
        + """
    HelpScreen #help-keys {
        height: auto;
    }
    HelpScreen #help-foot {
        color: $text-muted;
    }
    """
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "close", show=False),
    ]

    def __init__(self, *, attached: bool = False) -> None:
        super().__init__()
        self.attached = attached

    def compose(self) -> ComposeResult:
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for key, what in keys_of(self.attached):
            table.add_row(Text(key), Text(what))  # plain text: `[slo]` is not markup
        with VerticalScroll() as v:
            v.border_title = "oxconsole keys"
            yield Static(table, id="help-keys")
            yield Static(Text("escape or ? closes this"), id="help-foot")


class ConfirmStop(ModalScreen[bool]):
    """Q asks before it stops the run: y stops it (or, while it drains, cancels what is in
    flight); any other key dismisses the question and the run goes on."""

    DEFAULT_CSS = dialog_css("ConfirmStop", "Vertical", 60)

    def __init__(self, *, draining: bool = False, in_flight: int = 0) -> None:
        super().__init__()
        self.draining = draining
        self.in_flight = in_flight

    def compose(self) -> ComposeResult:
        if self.draining:
            title = "cancel the requests in flight?"
            what = f"y cancels the {self.in_flight} in flight now (they are sent again by --resume)"
        else:
            title = "stop the run?"
            what = "y stops it: no new requests, the ones in flight finish, then the summary"
        with Vertical() as v:
            v.border_title = title
            yield Static(Text(what), id="confirm-what")
            yield Static(Text("any other key: the run goes on"), id="confirm-no")

    def on_key(self, event: events.Key) -> None:
        event.stop()
        event.prevent_default()
        self.dismiss(event.key == "y")


class FilterPrompt(ModalScreen[None]):
    """`/`: a line at the bottom to type a part of a name; the models and errors tables show only
    the rows whose name holds it (any case) as it is typed. Enter keeps the filter, escape
    clears it (as escape does on the main screen)."""

    DEFAULT_CSS = """
    FilterPrompt {
        align: left bottom;
        background: $background 0%;
    }
    FilterPrompt > Input {
        width: 100%;
        border: none;
        height: 1;
        padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "clear", "clear", show=False)]

    def __init__(self, text: str, on_change: Callable[[str], None], *, cursor_blink: bool = True) -> None:
        super().__init__()
        self.text = text
        self.on_change = on_change
        self._blink = cursor_blink

    def compose(self) -> ComposeResult:
        field = Input(self.text, placeholder="/ filter models and errors by name", id="filter", compact=True)
        field.cursor_blink = self._blink
        yield field

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        self.on_change(event.value)

    @on(Input.Submitted)
    def _kept(self) -> None:
        self.dismiss(None)

    def action_clear(self) -> None:
        self.on_change("")
        self.dismiss(None)


@dataclass(frozen=True)
class ModelRoute:
    """A model as the routing editor shows it."""

    name: str
    weight: float
    enabled: bool
    step: int | None = None
    """Its place in the cascade (1 = first), None = not a step; shown only for a run with `[quality]`."""


class EnabledBox(Checkbox):
    """A one-line checkbox whose mark and label both say on or off, legible without colour."""

    def __init__(self, value: bool, *, id: str) -> None:
        super().__init__(_on_off(value), value, id=id, compact=True)
        self.BUTTON_INNER = "X" if value else " "

    def watch_value(self) -> None:
        value = self.value
        self.BUTTON_INNER = "X" if value else " "
        self.label = _on_off(value)
        super().watch_value()


def routes_of(snap: Snapshot) -> list[ModelRoute]:
    """The models as the routing editor shows them: live weights, switches and cascade steps."""
    steps = list((snap.quality or {}).get("steps") or ())
    return [
        ModelRoute(name, g.weight, g.enabled, steps.index(name) + 1 if name in steps else None)
        for name, g in snap.gauges.models.items()
    ] or [ModelRoute(m.name, 1.0, True) for m in snap.models]


def routing_words(cmd: Command) -> str:
    """What one of the editor's commands changes, in words for the status line."""
    if isinstance(cmd, SetWeight):
        return f"{cmd.model} weight {fmt_weight(cmd.value)}"
    if isinstance(cmd, EnableModel):
        return f"{cmd.model} {'on' if cmd.enabled else 'off'}"
    if isinstance(cmd, SetCascade):
        return "cascade " + "→".join(cmd.steps)
    return type(cmd).__name__


def _step_key(m: ModelRoute) -> int:
    return m.step if m.step is not None else 0


def _on_off(value: bool) -> str:
    return "on" if value else "off"


class RoutingEditor(ModalScreen[list[Command] | None]):
    """Per model, one line: name, a weight input, the share it gives, an enabled checkbox. Apply
    dismisses with the commands for what changed (SetWeight, EnableModel); escape dismisses with
    None. The rows scroll when there are more models than lines."""

    DEFAULT_CSS = (
        dialog_css("RoutingEditor", "Vertical", 72)
        + """
    RoutingEditor #routes {
        height: auto;
        scrollbar-size-vertical: 1;
    }
    RoutingEditor .route, RoutingEditor #routes-head {
        grid-size: 4 1;
        grid-columns: 1fr 10 7 8;
        grid-gutter: 0 1;
        height: 1;
    }
    RoutingEditor .-cascade .route, RoutingEditor .-cascade #routes-head {
        grid-size: 5 1;
        grid-columns: 1fr 10 7 8 5;
    }
    RoutingEditor .route .step {
        width: 5;
    }
    RoutingEditor #routes-head {
        color: $text-primary;
        text-style: bold;
    }
    RoutingEditor .route Label {
        width: 100%;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    RoutingEditor .route Input {
        width: 10;
    }
    RoutingEditor .route Input:focus {
        background: $primary 30%;
    }
    RoutingEditor .route .share {
        width: 7;
        text-align: right;
        color: $text-muted;
    }
    RoutingEditor .route.-off Label {
        color: $text-muted;
    }
    RoutingEditor #routing-error {
        color: $error;
        height: auto;
        min-height: 1;
    }
    RoutingEditor #routing-buttons {
        height: 1;
        align-horizontal: right;
    }
    RoutingEditor #routing-buttons Button {
        margin-left: 2;
    }
    RoutingEditor .hint {
        color: $text-muted;
    }
    """
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel"),
        Binding("ctrl+s", "apply", "apply"),
    ]

    AUTO_FOCUS = "#weight-0"

    CHROME = 6
    """Lines of the dialog that are not model rows: border, hint, heading, error line, buttons."""

    def __init__(
        self, models: Sequence[ModelRoute], *, cursor_blink: bool = True, cascade: bool = False
    ) -> None:
        super().__init__()
        self.models = tuple(models)
        self._blink = cursor_blink
        self.cascade = cascade
        """The run judges its answers: a "step" column orders the cascade (blank: not a step)."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="-cascade" if self.cascade else "") as v:
            v.border_title = "routing"
            hint = "target: the share its weight gives · off: no new requests"
            yield Static(hint + (" · step: cascade order" if self.cascade else ""), classes="hint")
            with Grid(id="routes-head"):
                yield Label("model")
                yield Label("weight")
                yield Label("target", classes="share")
                yield Label("enabled")
                if self.cascade:
                    yield Label("step")
            with VerticalScroll(id="routes") as rows:
                rows.can_focus = False  # tab goes from field to field; focus scrolls the rows
                for i, m in enumerate(self.models):
                    with Grid(classes="route" if m.enabled else "route -off", id=f"route-{i}"):
                        yield Label(shown(m.name, one_line=True), markup=False)  # a name is text
                        weight = Input(
                            fmt_weight(m.weight),
                            type="number",
                            id=f"weight-{i}",
                            select_on_focus=True,
                            compact=True,
                        )
                        weight.cursor_blink = self._blink
                        yield weight
                        yield Label("", id=f"share-{i}", classes="share")
                        yield EnabledBox(m.enabled, id=f"enabled-{i}")
                        if self.cascade:
                            step = "" if m.step is None else str(m.step)
                            yield Input(
                                step, id=f"step-{i}", classes="step", compact=True, select_on_focus=True
                            )
            yield Static("", id="routing-error")
            with Horizontal(id="routing-buttons"):
                yield Button("Apply (ctrl+s)", variant="primary", id="apply", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self._fit()
        self._show_shares()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """Give the rows what the screen has left, so Apply and Cancel stay visible; they scroll."""
        rows = self.query_one("#routes", VerticalScroll)
        rows.styles.max_height = max(2, self.size.height - self.CHROME)

    def _edits(self) -> list[tuple[float | None, bool]]:
        """(weight or None when not a number >= 0, enabled) per model, as the form reads now."""
        out: list[tuple[float | None, bool]] = []
        for i in range(len(self.models)):
            text = self.query_one(f"#weight-{i}", Input).value.strip()
            enabled = self.query_one(f"#enabled-{i}", Checkbox).value
            try:
                weight: float | None = float(text)
            except ValueError:
                weight = None
            if weight is not None and not (0 <= weight < float("inf")):
                weight = None
            out.append((weight, enabled))
        return out

    def _show_shares(self) -> None:
        """The share of traffic each row would get under weighted routing with the form's values."""
        edits = self._edits()
        total = sum(w for w, enabled in edits if enabled and w)
        for i, (w, enabled) in enumerate(edits):
            live = enabled and total and w
            share = "–" if w is None else (f"{100 * w / total:.0f}%" if live else "0%")
            self.query_one(f"#share-{i}", Label).update(share)
            self.query_one(f"#route-{i}").set_class(not enabled, "-off")

    @on(Input.Changed)
    @on(Checkbox.Changed)
    def _edited(self) -> None:
        self._show_shares()
        self.query_one("#routing-error", Static).update("")

    def commands(self) -> list[Command] | str:
        """The commands for the edits, or a message saying what is wrong."""
        out: list[Command] = []
        live = 0
        for i, m in enumerate(self.models):
            text = self.query_one(f"#weight-{i}", Input).value.strip()
            enabled = self.query_one(f"#enabled-{i}", Checkbox).value
            try:
                weight = float(text)
            except ValueError:
                return f"{m.name}: weight: expected a number >= 0, got {text!r}"
            if not weight >= 0 or weight == float("inf"):
                return f"{m.name}: weight: expected a number >= 0, got {text!r}"
            if weight != m.weight:
                out.append(SetWeight(m.name, weight))
            if enabled != m.enabled:
                out.append(EnableModel(m.name, enabled))
            if enabled and weight > 0:
                live += 1
        if live == 0:
            return "at least one model must stay enabled with a weight > 0"
        if self.cascade:
            steps = self._steps()
            if isinstance(steps, str):
                return steps
            now = tuple(m.name for m in sorted(self.models, key=_step_key) if m.step is not None)
            if steps != now:
                out.append(SetCascade(steps))
        return out

    def _steps(self) -> tuple[str, ...] | str:
        """The cascade the "step" column gives, in order, or what is wrong with it."""
        placed: dict[int, str] = {}
        for i, m in enumerate(self.models):
            text = self.query_one(f"#step-{i}", Input).value.strip()
            if not text:
                continue
            if not text.isdigit() or int(text) < 1:
                return f"{m.name}: step: expected a number >= 1 (the cascade's order) or blank, got {text!r}"
            if int(text) in placed:
                return f"{m.name}: step: {text} is already {placed[int(text)]}'s"
            placed[int(text)] = m.name
        if not placed:
            return "the cascade needs at least one step"
        return tuple(placed[k] for k in sorted(placed))

    def action_apply(self) -> None:
        result = self.commands()
        if isinstance(result, str):
            self.query_one("#routing-error", Static).update(result)
            return
        self.dismiss(result)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#apply")
    def _apply_pressed(self) -> None:
        self.action_apply()

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_apply()
