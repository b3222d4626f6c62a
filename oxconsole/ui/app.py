"""The console app: pulls snapshots on a timer, renders them, turns keys into commands.

Why this module exists: it is the only place that knows about both the run (through `RunSource`)
and the screen. The cadence is the UI's own: a `set_interval` timer at ``refresh`` Hz asks the
source for its latest snapshot and, only when it is a new one, hands it to every panel inside one
`batch_update`. Keys become small command objects sent to the source; the run applies them on its
own loop. Nothing here blocks on the run.

The layout and the key bindings are in `dashboard.py`; what a key sets and what the status line
says are decided in `keysteps.py`; here they meet the run and the screen.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path

from textual import on
from textual.app import App, SystemCommand
from textual.markup import escape as escape_markup
from textual.notifications import Notification, SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import TabbedContent

from oxconsole.base.safetext import shown
from oxconsole.control import RunSource
from oxconsole.engine.commands import (
    Command,
    CommandError,
    Pause,
    Resume,
    Stop,
)
from oxconsole.engine.livesettings import check
from oxconsole.metrics.snapshot import Snapshot
from oxconsole.ui.dashboard import MainScreen, palette
from oxconsole.ui.keysteps import (
    Pending,
    console_status,
    failed_mostly,
    filtered,
    paused_by_user,
    run_duration,
    sweep_refusal,
)
from oxconsole.ui.knobs import KnobActions
from oxconsole.ui.panels.header import HeaderPanel
from oxconsole.ui.panels.latency import LATENCY_METRICS, LatencyPanel
from oxconsole.ui.screens import (
    ConfirmStop,
    FilterPrompt,
    HelpScreen,
    RoutingEditor,
    routes_of,
    routing_words,
)
from oxconsole.ui.theming import use_themes
from oxconsole.ui.typeahead import plan as typeahead_plan
from oxconsole.ui.widgets import Panel

__all__ = ["ConsoleApp", "MainScreen", "run_console"]

FLASH_S = 2.0
"""How long a confirmation (``concurrency 48 → 53``) stays in the header's status line."""

FILTERED = {"models": "models", "models-tab": "models", "errors": "errors", "errors-tab": "errors"}
"""The panels `/` filters (wide and compact), by id, and their tab's name."""


class ConsoleApp(KnobActions, App[str]):
    """The live console over one `RunSource`. `App.run()` returns "quit" or "detach"."""

    TITLE = "oxconsole"
    ENABLE_COMMAND_PALETTE = True
    CSS = """
    Toast {
        padding: 0 1;
    }
    """
    """Toasts are one line, two with a title: they sit over the panels, so the smaller the better."""

    def __init__(
        self,
        source: RunSource,
        *,
        theme: str | None = None,
        refresh: float = 4.0,
        theme_dirs: Sequence[Path] | None = None,
        cursor_blink: bool = True,
        typeahead: str = "",
        attached: bool = False,
    ) -> None:
        super().__init__()
        self.source = source
        self.attached = attached
        """Opened by `oxconsole attach`: `q` and ctrl+c close the console, the run goes on."""
        self.refresh_hz = max(0.2, float(refresh))
        self.requested_theme = theme
        self.theme_dirs = theme_dirs
        self.cursor_blink = cursor_blink
        self.last: Snapshot | None = None
        self.stopping = False
        self.cancelling = False
        self.leaving = False
        self.sent: list[Command] = []
        """Every command sent, in order (tests and the help screen read it)."""
        self.ticks = 0
        self.renders = 0
        self._warned = 0  # engine warnings already shown
        self._status: tuple[str, ...] = ("", "", "")
        self.pending = Pending()
        self.prev_rate = 0.0
        self._timer: Timer | None = None
        self.flash: tuple[str, str] = ("", "")
        """The confirmation shown in the header's status line now: (text, "info" | "warn")."""
        self._flash_timer: Timer | None = None
        self._toasts: dict[str, Notification] = {}
        self._metric = 0
        self._scope = "window"
        self._theme_problems: list[str] = []
        self.typeahead = typeahead
        """Keys typed before the console was up (`typeahead.take`), applied with the first figures."""
        self._ended_shown = False
        self.duration = 0.0
        """The run's ``run.duration`` (0: none), for the header's time bar."""
        self.filter = ""
        """What `/` filters the models and errors tables by ("": every row)."""
        self._register_themes()

    # -- start-up --------------------------------------------------------------------------------

    def _register_themes(self) -> None:
        self._theme_problems = use_themes(self, self.requested_theme, self.theme_dirs)

    def get_default_screen(self) -> Screen[None]:
        return MainScreen(self.source.name, on_ready=self.tick, attached=self.attached)

    async def on_mount(self) -> None:
        self.title = shown(f"oxconsole · {self.source.name}", one_line=True)
        for problem in self._theme_problems:
            self.toast(problem, title="theme", severity="warning", timeout=8)
        try:
            await self.source.start()
        except OSError as e:  # the run is not there (any more): say so, q leaves
            self.toast(f"the run did not answer ({e}): q leaves", kind="start", severity="error", timeout=60)
            self.typeahead = ""
            return
        self.duration = run_duration(self.source.workload_path, self.source.overrides)
        self._timer = self.set_interval(1.0 / self.refresh_hz, self.tick, name="pull snapshot")
        self.tick()

    @property
    def main(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    # -- the cadence -----------------------------------------------------------------------------

    def tick(self) -> None:
        """Pull the latest snapshot; render only when it (or the status line) changed."""
        if self.leaving or not self.screen_stack:
            return  # (a last timer tick can land while the app is shutting down)
        self.ticks += 1
        src = self.source
        if src.finished and (self.stopping or self._sweep_over()):
            self.call_later(self.leave, "quit")  # a sweep's end closes the console: its table follows
            return
        main = self.main
        snap = self._frozen_at_end(src.latest())
        self._show_refusal()
        if snap is None or not main.panels:
            return
        if self.typeahead:
            typed, self.typeahead = self.typeahead, ""
            self.call_later(self._apply_typeahead, typed)
        status = self._status_of(snap) + self.flash
        if snap is self.last and status == self._status:
            return
        self.last = snap
        self._status = status
        self.renders += 1
        if snap.plans:
            main.reveal("cost")
        if snap.sweep is not None:
            main.reveal("points")
        if snap.quality is not None:
            main.reveal("cascade")
        for warning in snap.gauges.warnings[self._warned :]:
            # the engine's warnings (open-files limit, TLS off, ...), each once, until dismissed
            self.toast(
                warning,
                kind=f"engine-warning-{self._warned}",
                title="warning",
                severity="warning",
                timeout=15,
            )
            self._warned += 1
        final = snap.gauges.state == "done" or src.finished
        if final and not self._ended_shown:
            self._ended_shown = True
            if failed_mostly(snap):  # the compact layout shows why it failed, not the models
                main.query_one(TabbedContent).active = "tab-errors"
        shown_rows = filtered(snap, self.filter) if self.filter else snap
        with self.batch_update():
            for panel in main.panels:
                skip = panel.EVERY > 1 and self.renders % panel.EVERY and panel.snapshot is not None
                if skip and not final:
                    continue
                if isinstance(panel, HeaderPanel):
                    panel.state, panel.note, panel.note_level, panel.flash, panel.flash_level = status
                    panel.duration = self.duration
                    if panel.snapshot is snap:
                        panel.redraw()  # only the status line changed
                panel.snapshot = shown_rows if panel.id in FILTERED else snap

    def _frozen_at_end(self, snap: Snapshot | None) -> Snapshot | None:
        """The run's figures as they were at its end: once a snapshot says "done", later ones
        (a window still sliding over a finished run) never replace it, so "now" stops there."""
        last = self.last
        if last is not None and last.gauges.state == "done" and snap is not last:
            return last
        return snap

    def _show_refusal(self) -> None:
        """A command the run refused over its socket (it answered an error): why, in a toast and
        the status line (over what the key said it would do); the keys step from the run's
        figures again. In process the refusal is raised at `send` instead."""
        take = getattr(self.source, "take_error", None)
        err = take() if callable(take) else None
        if not err:
            return
        self.pending.forget()
        self.toast(str(err), kind="command", title="refused", severity="error", timeout=8)
        self._set_flash(f"refused: {err}", "warn")

    def _sweep_over(self) -> bool:
        """The source is a sweep that has ended (its last snapshot carries the sweep gauge)."""
        snap = self.source.latest() or self.last
        return snap is not None and snap.sweep is not None

    def _status_of(self, snap: Snapshot) -> tuple[str, str, str]:
        """(state shown, note line, note level) from the run and what the console is doing."""
        src = self.source
        return console_status(
            snap,
            finished=src.finished,
            connected=src.connected,
            stopping=self.stopping,
            cancelling=self.cancelling,
            attached=self.attached,
        )

    # -- telling the user ------------------------------------------------------------------------

    def tell(self, text: str, level: str = "info") -> None:
        """A one-line confirmation in the header's status line for FLASH_S seconds. It covers
        nothing, and the next one replaces it (two presses of - never stack up)."""
        self._set_flash(text, level)
        self.tick()

    def _set_flash(self, text: str, level: str) -> None:
        self.flash = (text, level)
        if self._flash_timer is not None:
            self._flash_timer.stop()
        self._flash_timer = self.set_timer(FLASH_S, self._end_flash, name="end flash")

    def _end_flash(self) -> None:
        self.flash = ("", "")
        self._flash_timer = None
        self.tick()

    def toast(
        self,
        message: str,
        *,
        kind: str = "",
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float = 4.0,
        keep: bool = False,
    ) -> None:
        """A notification for what needs more than the status line (errors, theme problems).
        A toast of a ``kind`` replaces the one of that kind still showing, or, with ``keep``, is
        dropped while that one shows (one "no figures yet" is enough)."""
        old = self._toasts.get(kind) if kind else None
        if old is not None and old in self._notifications and not old.has_expired:
            if keep:
                return
            self._unnotify(old, refresh=False)
        # the run's words may carry a model's name: no control character (a Notification made
        # here is plain text, never markup: `[bold]` in a name shows as it is)
        note = Notification(shown(message), shown(title, one_line=True), severity, timeout)
        if kind:
            self._toasts[kind] = note
        # what App.notify does once its message arrives, done now so that keys pressed before
        # then see this toast (notify is for other threads; this runs on the app's own)
        self._notifications.add(note)
        self._refresh_notifications()

    # -- sending -----------------------------------------------------------------------------------

    def send(self, cmd: Command) -> bool:
        """Send a command; False, with a toast saying why, when no run could take it (checked here
        as the run checks it, `live.check`) or it could not be sent."""
        try:
            cmd = check(cmd)
            self.sent.append(cmd)
            self.source.send(cmd)  # the run checks it too (and the model names, which it knows)
        except CommandError as e:
            self.toast(str(e), kind="command", title="refused", severity="error", timeout=8)
            return False
        except Exception as e:  # a closed socket must not take the console down
            self.toast(f"could not send {type(cmd).__name__}: {e}", kind="send", severity="error")
            return False
        return True

    def need_snapshot(self) -> Snapshot | None:
        snap = self.source.latest() or self.last
        if snap is None:
            self.toast("no figures from the run yet", kind="no-figures", severity="warning", keep=True)
        return snap

    def need_live(self, setting: str = "") -> Snapshot | None:
        """The latest snapshot while the run can still be changed; after its end, or for a
        `setting` a sweep holds fixed, None, having said so (a + then would confirm a change that
        does nothing, or spoil the sweep's point)."""
        snap = self.need_snapshot()
        if setting and self.refused(snap, setting):
            return None
        if snap is not None and (self.source.finished or snap.gauges.state == "done" or self.stopping):
            ended = (
                "the run is stopping" if self.stopping and not self.source.finished else "the run has ended"
            )
            self.tell(f"{ended}: nothing to change · q exits and prints the summary", "warn")
            return None
        return snap

    def refused(self, snap: Snapshot | None, setting: str) -> bool:
        """A sweep holds `setting` fixed: said in the status line."""
        refused = sweep_refusal(snap, setting)
        if refused is not None:
            self.tell(refused, "warn")
        return refused is not None

    async def _apply_typeahead(self, typed: str) -> None:
        """Apply the keys typed before the console was up, in order, as if pressed now, and say
        so in the status line (with what the last one did)."""
        bound = self.main.key_actions()
        actions, shown, dropped = typeahead_plan(typed, bound)
        for action in actions:
            await self.run_action(action)
        said, level = self.flash
        words = f"typed while starting: {shown or 'no console key'}"
        if dropped:
            words += f" ({dropped} other key{'s' if dropped > 1 else ''} ignored)"
        if actions and said:
            words += f" → {said}"
        self.tell(words, level or "info")

    # -- actions (keys, command palette) -----------------------------------------------------------

    def action_pause(self) -> None:
        """Pause dispatch, or resume it."""
        snap = self.need_live()
        if snap is None:
            return
        pend = self.pending.get("paused")
        if pend is not None:
            paused = bool(pend)
        else:
            paused = snap.gauges.state == "paused" and paused_by_user(snap)
        if paused:
            self.pending.remember("paused", 0.0)
            self.send(Resume())
            self.tell("resumed")
        else:
            self.pending.remember("paused", 1.0)
            self.send(Pause())
            self.tell("pausing…")

    def action_routing(self) -> None:
        """Open the routing editor on the models' live weights and states."""
        snap = self.need_live()
        if snap is None:
            return
        editor = RoutingEditor(
            routes_of(snap), cursor_blink=self.cursor_blink, cascade=snap.quality is not None
        )
        self.push_screen(editor, self._routing_done)

    def _routing_done(self, commands: list[Command] | None) -> None:
        if not commands:
            if commands is not None:
                self.tell("routing unchanged")
            return
        for cmd in commands:
            self.send(cmd)
        self.tell("routing: " + ", ".join(routing_words(cmd) for cmd in commands))

    async def action_detach(self) -> None:
        """Leave the console; the run goes on."""
        await self.leave("detach")

    def action_stop(self) -> None:
        """First press: stop dispatching and let requests in flight finish; second: cancel them."""
        src = self.source
        if src.finished or not src.connected:
            self.call_later(self.leave, "quit")
            return
        if not self.stopping:
            self.stopping = True
            self.send(Stop())  # the status line says "draining…" at once
        elif not self.cancelling:
            self.cancelling = True
            self.send(Stop(cancel=True))
        self._status = ()  # show the new status at once
        self.tick()

    async def action_quit(self) -> None:
        """ctrl+q: the same as q (a run is never dropped without its journal flushed)."""
        if self.attached:
            await self.action_close()
        else:
            self.action_stop()

    async def action_close(self) -> None:
        """q and ctrl+c in a console opened with `oxconsole attach`: close the console and leave
        the run going, as d does; a run already over leaves with its summary, as q does."""
        src = self.source
        if src.finished or not src.connected:
            await self.leave("quit")
            return
        await self.leave("detach")

    def action_stop_asked(self) -> None:
        """Q: stop the run (or, while it drains, cancel what is in flight) once y confirms it."""
        src = self.source
        if src.finished or not src.connected:
            self.call_later(self.leave, "quit")
            return
        if self.cancelling:
            self.tell("already cancelling the requests in flight", "warn")
            return
        if isinstance(self.screen, ConfirmStop):
            return
        in_flight = self.last.gauges.in_flight if self.last is not None else 0
        self.push_screen(ConfirmStop(draining=self.stopping, in_flight=in_flight), self._stop_confirmed)

    def _stop_confirmed(self, yes: bool | None) -> None:
        if yes:
            self.action_stop()
        else:
            self.tell("not stopped: the run goes on")

    def action_help(self) -> None:
        self.push_screen(HelpScreen(attached=self.attached))

    def action_histogram(self) -> None:
        """Next latency metric; in the compact layout also shows the latency tab."""
        main = self.main
        if main.compact:
            tabs = main.query_one(TabbedContent)
            if tabs.active != "tab-latency":
                tabs.active = "tab-latency"
                return
        self._metric = (self._metric + 1) % len(LATENCY_METRICS)
        for p in main.query(LatencyPanel):
            p.metric = LATENCY_METRICS[self._metric].key

    def action_scope(self) -> None:
        """Latency histogram: last window <-> whole run."""
        self._scope = "run" if self._scope == "window" else "window"
        for p in self.main.query(LatencyPanel):
            p.scope = self._scope
        self.tell("latency: whole run" if self._scope == "run" else "latency: last 10 s")

    def action_filter(self) -> None:
        """/: type a part of a name; the models and errors tables show the rows that hold it."""
        if not isinstance(self.screen, FilterPrompt):
            self.push_screen(FilterPrompt(self.filter, self.set_filter, cursor_blink=self.cursor_blink))

    def action_clear_filter(self) -> None:
        """escape: every model and error class again."""
        if self.filter:
            self.set_filter("")
            self.tell("filter cleared")

    def set_filter(self, text: str) -> None:
        """Filter the models and errors tables by ``text`` (a part of a name, any case; "": none),
        said in their titles (wide) or their tabs (compact), and drawn at once."""
        self.filter = text.strip()
        main = self.main
        said = f" /{shown(self.filter, one_line=True)}" if self.filter else ""
        tabs = main.query_one(TabbedContent)
        snap = self.last
        for panel in main.panels:
            name = FILTERED.get(panel.id or "")
            if name is None:
                continue
            panel.border_subtitle = f"filter{said} · esc clears" if said else ""
            tabs.get_tab(f"tab-{name}").label = name + said
            if snap is not None:  # drawn now, whichever snapshot the panel takes next
                panel.snapshot = filtered(snap, self.filter)

    def action_show_tab(self, name: str) -> None:
        """The palette's "Tab: NAME": that tab in the compact layout (on a wide terminal every
        panel is on screen already)."""
        main = self.main
        if f"tab-{name}" not in main.shown_tabs():
            self.tell(f"this run has no {name} view", "warn")
            return
        main.query_one(TabbedContent).active = f"tab-{name}"
        if not main.compact:
            self.tell(f"{name}: on screen (the tabs are for smaller terminals)")

    def action_next_tab(self) -> None:
        tabs = self.main.query_one(TabbedContent)
        order = self.main.shown_tabs()
        i = order.index(tabs.active) if tabs.active in order else -1
        tabs.active = order[(i + 1) % len(order)]

    @on(TabbedContent.TabActivated)
    def _tab_shown(self, event: TabbedContent.TabActivated) -> None:
        # a panel in a hidden tab drew nothing; paint it in full now that it shows
        for panel in event.pane.query(Panel):
            panel.restyle()

    async def leave(self, result: str) -> None:
        if self.leaving:
            return
        self.leaving = True
        if self._timer is not None:
            self._timer.stop()
        try:
            await self.source.close()
        except Exception:  # leaving must not fail because a socket is already gone
            pass
        self.exit(result)

    # -- command palette ---------------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        # Textual's own "Keys" (its key panel) would sit beside ours (the help screen)
        yield from (c for c in super().get_system_commands(screen) if c.title != "Keys")
        # the palette reads help as markup: `[slo]` escaped
        for title, help_text, action in palette(self.attached):
            yield SystemCommand(title, escape_markup(help_text), partial(self.run_action, action))


def run_console(
    source: RunSource, *, theme: str | None = None, refresh: float = 4.0, attached: bool = False
) -> str:
    """Run the console until the user quits ("quit", the run stopped) or detaches ("detach").
    Keys typed while it started (held by `typeahead.hold`) are applied with the first figures.
    ``attached``: opened by `oxconsole attach` (`q` closes the console, `Q` stops the run)."""
    from oxconsole.ui.typeahead import take

    app = ConsoleApp(source, theme=theme, refresh=refresh, typeahead=take(), attached=attached)
    result = app.run()
    return result if result in ("quit", "detach") else "quit"
