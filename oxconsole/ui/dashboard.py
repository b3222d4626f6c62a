"""The console's main screen: which panel goes where at which size, and the console's keys.

Why this module exists: the layout is its own question (what shows at 140x38 and above, what
shares the tabbed area below), apart from what the app does with snapshots and keys. At 140x38
and above everything is visible at once; below, the top row (header, in flight, throughput) stays
and models / latency / errors / phase share a tabbed area. The key bindings live here because
modal screens must not see them; each one names an action of the app.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent, TabPane
from textual.widgets._footer import FooterKey

from oxconsole.ui.panels.cascade import CascadePanel
from oxconsole.ui.panels.cost import CostPanel
from oxconsole.ui.panels.errors import ErrorsPanel
from oxconsole.ui.panels.header import HeaderPanel
from oxconsole.ui.panels.in_flight import InFlightPanel
from oxconsole.ui.panels.latency import LatencyPanel
from oxconsole.ui.panels.models import ModelsPanel
from oxconsole.ui.panels.phase import PhasePanel
from oxconsole.ui.panels.points import PointsPanel
from oxconsole.ui.panels.throughput import ThroughputPanel
from oxconsole.ui.widgets import Panel, forget_palettes

__all__ = ["ATTACHED_KEYS", "PALETTE", "MainScreen", "palette"]

PALETTE: tuple[tuple[str, str, str], ...] = (
    ("Concurrency up (+)", "10% more requests in flight", "app.concurrency(1)"),
    ("Concurrency down (-)", "10% fewer requests in flight", "app.concurrency(-1)"),
    ("Auto concurrency toggle (a)", "hold the highest concurrency meeting [slo]", "app.auto"),
    ("Rate up (])", "10% more requests per second", "app.rate(1)"),
    ("Rate down ([)", "10% fewer requests per second", "app.rate(-1)"),
    ("Rate unlimited toggle (0)", "no rate limit / back to the previous rate", "app.unlimited"),
    ("Token budget up (})", "10% more tokens a minute", "app.tpm(1)"),
    ("Token budget down ({)", "10% fewer tokens a minute", "app.tpm(-1)"),
    ("Routing editor (w)", "weights and enabled models", "app.routing"),
    ("Pause / resume (space)", "stop or restart dispatching", "app.pause"),
    ("Save tuned workload (s)", "write NAME.tuned.toml beside the workload", "app.save"),
    ("Detach (d)", "close the console, the run goes on", "app.detach"),
    ("Stop the run (q)", "finish what is in flight, then exit", "app.stop"),
    ("Stop the run, asked first (Q)", "y confirms: finish what is in flight, then exit", "app.stop_asked"),
    ("Keys and help (?)", "the help screen with every key", "app.help"),
    ("Latency: next metric (h)", "TTFT, inter-token, end-to-end, queue", "app.histogram"),
    ("Latency: window / whole run (r)", "last 10 s or the whole run", "app.scope"),
    ("Filter models and errors (/)", "by a part of a name; esc clears it", "app.filter"),
    ("Clear the filter (esc)", "every model and error class again", "app.clear_filter"),
    ("Next tab (t)", "the compact layout's next tab", "app.next_tab"),
    ("Tab: models", "one row per model", "app.show_tab('models')"),
    ("Tab: latency", "the latency histogram", "app.show_tab('latency')"),
    ("Tab: errors", "error classes and their first detail", "app.show_tab('errors')"),
    ("Tab: phase", "this phase against the whole run", "app.show_tab('phase')"),
    ("Tab: cost", "what the run costs under each plan", "app.show_tab('cost')"),
    ("Tab: points", "a sweep's points so far", "app.show_tab('points')"),
    ("Tab: cascade", "valid answers and escalations per model", "app.show_tab('cascade')"),
)
"""The command palette's entries (ctrl+p): (title, help, action), every key's action by name."""

ATTACHED_PALETTE: dict[str, tuple[str, str, str]] = {
    "app.stop": ("Close the console (q)", "the run goes on; oxconsole attach brings it back", "app.close"),
}
"""In a console opened with `oxconsole attach`, `q` closes the console (the run goes on)."""


def palette(attached: bool) -> tuple[tuple[str, str, str], ...]:
    """The palette's entries for a console that started its run, or one `attached` to it."""
    if not attached:
        return PALETTE
    return tuple(ATTACHED_PALETTE.get(action, (title, what, action)) for title, what, action in PALETTE)


_CONC = Binding.Group("conc", compact=True)
_RATE = Binding.Group("rate", compact=True)


FOOTER_WIDTH = 80
"""The footer's keys fit this many columns at their usual spacing."""
FOOTER_NARROW_DROP = frozenset({"0", "s", "d"})
"""Keys the footer leaves out below FOOTER_WIDTH (they still work; the help screen and the palette
list them), so that `q stop` and `? help` stay in sight at 60 columns."""
ATTACHED_NARROW_DROP = FOOTER_NARROW_DROP | {"w"}
"""An attached console's footer has `Q stop` beside `q close`: `w` makes room for it."""


class KeysFooter(Footer):
    """The footer, without `FOOTER_NARROW_DROP` on a narrow terminal."""

    narrow = False
    drop = FOOTER_NARROW_DROP

    def fit(self, width: int) -> None:
        narrow = width < FOOTER_WIDTH
        if narrow != self.narrow:
            self.narrow = narrow
            self.refresh(recompose=True)

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if self.narrow and isinstance(widget, FooterKey) and widget.key in self.drop:
                continue
            yield widget


TABS: tuple[tuple[str, type[Panel]], ...] = (
    ("models", ModelsPanel),
    ("latency", LatencyPanel),
    ("errors", ErrorsPanel),
    ("phase", PhasePanel),
    ("cost", CostPanel),
    ("points", PointsPanel),
    ("cascade", CascadePanel),
)
"""The compact layout's tabs, in order: the pane `tab-NAME` holds the panel `NAME-tab`."""

SHOWN_BY = {"cost": "-plans", "points": "-sweep", "cascade": "-quality"}
"""The tabs hidden until the run has what they show, and the screen's class that shows them
(`MainScreen.reveal`; wide, the panel under the models)."""


ATTACHED_KEYS: tuple[Binding, ...] = (
    Binding("d", "app.detach", "detach", show=False),
    Binding("q", "app.close", "close"),
    Binding("Q", "app.stop_asked", "stop"),
    Binding("ctrl+c", "app.close", "close", show=False),
)
"""A console opened with `oxconsole attach` is a viewer: people leave a viewer with `q` (less,
htop, k9s) or ctrl+c, and a long run must not end by that reflex. There `q` and ctrl+c close the
console as `d` does (which leaves the footer to `Q`), and `Q` stops the run after a confirmation."""


class MainScreen(Screen[None]):
    """The dashboard. Its bindings are the console keys (modal screens do not see them)."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (140, "-wide")]  # noqa: RUF012  (Textual's own type)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (38, "-tall")]  # noqa: RUF012

    DEFAULT_CSS = """
    MainScreen {
        layout: vertical;
        background: $background;
    }
    MainScreen #top {
        height: 15;
    }
    MainScreen #top InFlightPanel {
        width: 56;
        height: 100%;
    }
    MainScreen #top ThroughputPanel {
        width: 1fr;
        height: 100%;
    }
    MainScreen #wide {
        height: 1fr;
    }
    MainScreen #mid {
        height: 1fr;
    }
    MainScreen #mid LatencyPanel {
        width: 1fr;
    }
    MainScreen #mid PhasePanel {
        width: 1fr;
    }
    MainScreen #mid ErrorsPanel {
        width: 1fr;
    }
    MainScreen #wide CostPanel {
        display: none;
    }
    MainScreen.-plans #wide CostPanel {
        display: block;
    }
    MainScreen #wide PointsPanel {
        display: none;
    }
    MainScreen #wide CascadePanel {
        display: none;
    }
    MainScreen.-quality #wide CascadePanel {
        display: block;
    }
    MainScreen.-sweep #wide PointsPanel {
        display: block;
    }
    MainScreen #tabs {
        display: none;
        height: 1fr;
    }
    MainScreen #tabs Panel {
        border: none;
        height: 1fr;
        max-height: 100%;
        padding: 0 1;
    }
    MainScreen #tabs TabPane {
        padding: 0;
    }
    MainScreen.-narrow #top, MainScreen.-short #top {
        height: 7;
    }
    MainScreen.-narrow #top InFlightPanel, MainScreen.-short #top InFlightPanel {
        width: 1fr;
    }
    MainScreen.-narrow #wide, MainScreen.-short #wide {
        display: none;
    }
    MainScreen.-narrow #tabs, MainScreen.-short #tabs {
        display: block;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "app.concurrency(1)", "more", key_display="+", group=_CONC),
        Binding("minus", "app.concurrency(-1)", "fewer", key_display="-", group=_CONC),
        Binding("a", "app.auto", "auto", group=_CONC),
        Binding("right_square_bracket", "app.rate(1)", "faster", key_display="]", group=_RATE),
        Binding("left_square_bracket", "app.rate(-1)", "slower", key_display="[", group=_RATE),
        Binding("0", "app.unlimited", "∞"),
        # not in the footer (at 80 columns it would push out "? help"): "bound by tpm ({/} change
        # it)" says them where they matter, and the help screen and the palette list them
        Binding("right_curly_bracket", "app.tpm(1)", "tpm+", key_display="}", show=False),
        Binding("left_curly_bracket", "app.tpm(-1)", "tpm-", key_display="{", show=False),
        Binding("w", "app.routing", "routes"),
        Binding("space", "app.pause", "pause"),
        Binding("s", "app.save", "save"),
        Binding("d", "app.detach", "detach"),
        Binding("q", "app.stop", "stop"),
        Binding("Q", "app.stop_asked", "stop", show=False),
        Binding("question_mark", "app.help", "help", key_display="?"),
        Binding("h", "app.histogram", "metric", show=False),
        Binding("r", "app.scope", "window/run", show=False),
        Binding("t", "app.next_tab", "next tab", show=False),
        Binding("slash", "app.filter", "filter", key_display="/", show=False),
        Binding("escape", "app.clear_filter", "clear filter", show=False),
        Binding("colon", "app.command_palette", "palette", key_display=":", show=False),
        Binding("ctrl+c", "app.stop", "stop", show=False),
    ]

    def __init__(
        self, run_name: str, on_ready: Callable[[], None] | None = None, *, attached: bool = False
    ) -> None:
        super().__init__(id="main")
        self.attached = attached
        if attached:  # q and ctrl+c close the console; Q (shown) stops the run after a confirmation
            for binding in ATTACHED_KEYS:
                self._bindings.key_to_bindings[binding.key] = [binding]
        self.run_name = run_name
        self.on_ready = on_ready
        """Called once the panels are mounted (the app renders its first snapshot then)."""
        self.panels: list[Panel] = []
        """Every panel, header first; filled on mount (the app renders only once it is set)."""

    def compose(self) -> ComposeResult:
        header = HeaderPanel(id="header")
        header.run_name = self.run_name
        yield header
        with Horizontal(id="top"):
            yield InFlightPanel(id="in-flight")
            yield ThroughputPanel(id="throughput")
        with Vertical(id="wide"):
            yield ModelsPanel(id="models")
            yield CostPanel(id="cost")
            yield PointsPanel(id="points")
            yield CascadePanel(id="cascade")
            with Horizontal(id="mid"):
                yield LatencyPanel(id="latency")
                yield PhasePanel(id="phase")
                yield ErrorsPanel(id="errors")
        with TabbedContent(id="tabs"):
            for name, panel in TABS:
                with TabPane(name, id=f"tab-{name}"):
                    yield panel(id=f"{name}-tab")
        footer = KeysFooter(show_command_palette=False)
        footer.drop = ATTACHED_NARROW_DROP if self.attached else FOOTER_NARROW_DROP
        yield footer

    def key_actions(self) -> dict[str, str]:
        """Each key of this screen and the action it runs (this console's: attached or not)."""
        return {key: bindings[0].action for key, bindings in self._bindings.key_to_bindings.items()}

    def on_mount(self) -> None:
        self.panels = list(self.query(Panel))
        for name in SHOWN_BY:  # until the run shows it has what they show
            self.query_one(TabbedContent).hide_tab(f"tab-{name}")
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)
        if self.on_ready is not None:
            self.on_ready()

    def on_resize(self) -> None:
        # the layout may have switched (wide <-> compact): panels shown again paint in full
        for panel in self.panels:
            panel.restyle()
        self.query_one(KeysFooter).fit(self.size.width)

    def _theme_changed(self, theme: object) -> None:
        forget_palettes()
        for panel in self.panels:
            panel.restyle()

    def reveal(self, name: str) -> None:
        """Show what only some runs have (`SHOWN_BY`): "cost" for what-if price plans, "points"
        for a sweep's points so far, "cascade" for a run that judges its answers; a panel under
        the models when wide, its tab when compact."""
        shown = SHOWN_BY[name]
        if not self.has_class(shown):
            self.add_class(shown)
            self.query_one(TabbedContent).show_tab(f"tab-{name}")

    def shown_tabs(self) -> list[str]:
        """The compact layout's tabs this run shows, in order."""
        return [f"tab-{name}" for name, _ in TABS if name not in SHOWN_BY or self.has_class(SHOWN_BY[name])]

    @property
    def costs_shown(self) -> bool:
        return self.has_class("-plans")

    @property
    def compact(self) -> bool:
        return self.has_class("-narrow") or self.has_class("-short")
