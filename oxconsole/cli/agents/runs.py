"""The runs an agent reaches: found, started, read and turned through what a person's tools use.

Why this module exists: `oxconsole mcp` must not be a second way to do anything. Its `validate` and
`start` parse the same flags with the same parsers as `oxconsole validate` and `oxconsole run`
(built into an argv from the agent's typed arguments, never a string it could smuggle flags into),
and start a run exactly as a console that detached does (`prepare_run`, `spawn_host`); a run is
read and turned over its control socket with the command objects the console's keys send, logged
`by = "agent"`; `runs` is `oxconsole ps`, a name is picked as `oxconsole attach` picks it, and a
summary or a comparison is what `oxconsole report` gives. Every refusal is the message the same
mistake gets on the command line or from the run (`Refused`, its text those words).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from oxconsole.base.exits import BadInput
from oxconsole.control import RunEntry, SocketSource, list_runs
from oxconsole.control.protocol import MIN_HZ
from oxconsole.engine.commands import Command, Stop, command_to_dict

__all__ = ["Refused", "RunRequest", "Runs", "Started", "Validated"]

STOP_WAIT_S = 300.0
"""How long `stop` waits for a run's end: its grace (10 s by default) and the journal's flush, with
room for a long `run.grace`; past it the answer says the run is still stopping."""
ASK_S = 10.0
"""How long a question to a run (its summary, a command) may take on a loaded machine."""


class _Ended(Exception):
    """A run known here has ended unseen; its summary is in `Runs._ended` now."""


class Refused(Exception):
    """Bad input, or a command the run refused; `str()` is the message the command line (or the
    run) gives the same mistake, one problem a line, every problem found."""


@dataclass(frozen=True)
class RunRequest:
    """What `validate` and `start` are asked to run: a workload file and/or a URL and model, with
    `--set` overrides and the quick-start flags. Numbers arrive as the agent sent them (any JSON
    value) and are judged by the command line's own parser and checks."""

    workload: str | None = None
    url: str | None = None
    model: str | None = None
    overrides: tuple[str, ...] = ()
    concurrency: object = None
    rate: object = None
    requests: object = None
    duration: object = None

    def argv(self) -> list[str]:
        """The flags a person would type for this request (`--flag=VALUE`, so that no value is read
        as a flag), the workload last behind `--` (so that no path is either)."""
        out: list[str] = []
        if self.url is not None:
            out.append(f"--url={self.url}")
        if self.model is not None:
            out.append(f"--model={self.model}")
        out += [f"--set={o}" for o in self.overrides]
        for flag, v in (
            ("concurrency", self.concurrency),
            ("rate", self.rate),
            ("requests", self.requests),
            ("duration", self.duration),
        ):
            if v is not None:
                out.append(f"--{flag}={_flag_text(v)}")
        if self.workload is not None:
            out += ["--", self.workload]
        return out


def _flag_text(v: object) -> str:
    """A JSON value as a person would type it after a flag: true/false for booleans (so that an
    integer flag refuses them, as it would on the command line), numbers and text as they are."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


@dataclass(frozen=True)
class Validated:
    """What would run (`oxconsole validate`'s text) and its headline figures."""

    name: str
    description: str
    models: tuple[str, ...]
    requests: int | None


@dataclass(frozen=True)
class Started:
    name: str
    """NAME-PID: the key `snapshot`, `set` and `stop` take (the bare NAME works while unique)."""
    pid: int
    journal: str


@contextlib.contextmanager
def _cli_words(prog: str) -> Iterator[None]:
    """Bad input as the command line words it: a usage error (argparse's, which would exit) or
    `BadInput` becomes `Refused` with the same text; what the command prints on stderr meanwhile
    (notes, warnings) still goes to stderr."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            yield
    except SystemExit:
        said = [line for line in err.getvalue().splitlines() if ": error: " in line]
        raise Refused("\n".join(said) or f"{prog}: bad arguments") from None
    except BadInput as e:
        raise Refused("\n".join(f"oxconsole: {line}" for line in str(e).split("\n"))) from None
    finally:
        rest = [line for line in err.getvalue().splitlines() if ": error: " not in line and line.strip()]
        if rest and not any(line.startswith("usage:") for line in rest):
            import sys

            print("\n".join(rest), file=sys.stderr)


def pick_run(entries: Sequence[RunEntry], name: str | None) -> RunEntry:
    """The one run `name` means (NAME-PID, or NAME while one run has it), as `oxconsole attach`
    picks it; `Refused` saying why, with the runs going, otherwise."""
    from oxconsole.cli.ps import choose

    try:
        return choose(list(entries), name)
    except BadInput as e:
        raise Refused(str(e)) from None


class Runs:
    """The runs of this user on this machine, as the MCP tools see them (`tools.py`). One control
    connection per run asked about, kept while the run lasts, its commands logged `by = "agent"`."""

    def __init__(self) -> None:
        self._sources: dict[str, SocketSource] = {}
        self._ended: dict[str, dict[str, Any]] = {}
        """Runs this server saw end: key (and name) -> the final summary, so that a `snapshot` or a
        `stop` after the end answers it rather than "no run"."""
        self._journals: dict[str, str] = {}
        """Runs started or reached here: key (and name) -> their journal, so that one that ended
        unseen (a short run, ended between two calls) is read from the summary it left."""
        self._keys: dict[str, str] = {}
        """Key (and name) -> the run's key (NAME-PID)."""

    # --- validate, start -------------------------------------------------------------------------
    def validate(self, req: RunRequest) -> Validated:
        from oxconsole.cli.flags import validate_parser
        from oxconsole.cli.prepare import load_checked
        from oxconsole.cli.quickstart import workload_to_validate
        from oxconsole.workload import describe

        argv = req.argv()
        with _cli_words("oxconsole validate"):
            ns = validate_parser().parse_args(argv)
            with workload_to_validate(ns, ["validate", *argv]) as path:
                w, stats = load_checked(path, ns.overrides)
                text = describe(w, stats)
        return Validated(w.name, text, tuple(m.name for m in w.models), stats.total_requests)

    async def start(self, req: RunRequest) -> Started:
        from oxconsole.cli.detached import spawn_host, wait_listening
        from oxconsole.cli.flags import run_parser
        from oxconsole.cli.prepare import prepare_run
        from oxconsole.cli.quickstart import workload_for

        argv = req.argv()
        with _cli_words("oxconsole run"):
            ns = run_parser("oxconsole run").parse_args(argv)
            ns.workload = workload_for(ns, ["run", *argv])
            prep = prepare_run(ns.workload, ns.overrides, ns.output, False, None)
        host = spawn_host(prep, resume=False, summary_json=None, progress_interval=ns.progress_interval)
        said: list[str] = []
        ended: list[dict[str, Any]] = []

        def early_end(summary: dict[str, Any], _results: object) -> None:
            ended.append(summary)

        entry = await asyncio.to_thread(
            wait_listening, host, timeout=60.0, show_end=early_end, say=said.append
        )
        journal = str(prep.results_path)
        if isinstance(entry, RunEntry):
            self._remember(entry.key, entry.name, journal)
            return Started(entry.key, entry.pid, journal)
        if not ended:
            raise Refused("\n".join(said) or f"oxconsole: the run ended at once (exit code {entry})")
        # over before its control socket was seen (a short run): started, and its end kept
        key = f"{prep.workload.name}-{host.proc.pid}"
        final = {"run": key, "state": "done", "exit_code": entry, **ended[0]}
        self._ended[key] = final
        self._ended.setdefault(prep.workload.name, final)
        return Started(key, host.proc.pid, journal)

    # --- reading and turning runs ------------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        """What `oxconsole ps --json` lists: the runs going, oldest first."""
        return [e.to_dict() for e in list_runs()]

    async def snapshot(self, name: str) -> dict[str, Any]:
        """The run so far in the summary's keys (its `name` the workload's), `run` its key, and what
        it is doing now: state, in_flight, concurrency, rate, tpm, paused, auto, phase."""
        going = await self._going(name)
        if isinstance(going, dict):
            return going
        src, key = going
        reply = await self._ask(src, key, {"op": "summary"})
        if reply is None:
            return self._ended.get(key) or self._gone(name)
        return {"run": key, **reply.get("live", {}), **reply.get("summary", {})}

    async def apply(self, name: str, commands: Sequence[Command]) -> tuple[list[dict[str, Any]], bool]:
        """The commands sent as one batch `by = "agent"`: every one admitted before any is applied,
        so a refused value changes nothing; the changes they made, as the run logged them, and
        whether they were held (the run is starting: applied when its clock starts)."""
        try:
            src, key = await self._source(name)
        except _Ended:
            raise Refused(f"{name}: the run has ended; nothing changed") from None
        batch = {"op": "cmds", "cmds": [command_to_dict(c) for c in commands], "by": src.by}
        reply = await self._ask(src, key, batch)
        if reply is None:
            raise Refused(f"{name}: the run has ended; nothing changed")
        return list(reply.get("changes") or []), bool(reply.get("held"))

    async def stop(self, name: str, cancel: object) -> dict[str, Any]:
        """Stop the run as `q` in its console does (`cancel`: cancel what is in flight at once) and
        wait for its end: its final summary, with `exit_code`."""
        going = await self._going(name)
        if isinstance(going, dict):
            return going
        src, key = going
        stop = command_to_dict(Stop(cancel))  # type: ignore[arg-type]  # judged by the run, as sent
        reply = await self._ask(src, key, {"op": "cmd", **stop, "by": src.by})
        if reply is not None:
            if not await src.wait_end(STOP_WAIT_S):
                raise Refused(f"{key}: still stopping after {STOP_WAIT_S:.0f} s; `runs` says when it is gone")
            self._keep_end(src, key)
        return self._ended.get(key) or self._gone(name)

    def summary(self, name: str | None, journal: str | None) -> dict[str, Any]:
        """A journal's summary as `oxconsole report --json` gives it, or an ended run's own."""
        if (name is None) == (journal is None):
            got = "both" if name else "neither"
            raise Refused(f"summary: expected one of name (a run) or journal (a path), got {got}")
        if name is not None:
            ended = self._ended.get(name) or self._left(name)
            if ended is None:
                raise Refused(
                    f"summary: {name}: no run of that name has ended here; for a run going, "
                    "`snapshot` gives its figures so far, and `journal` reads any journal"
                )
            return ended
        assert journal is not None
        from oxconsole.journal.identify import NotAJournal
        from oxconsole.reports.summary import summary_from_journal

        try:
            return summary_from_journal(journal)
        except OSError as e:
            why = e.strerror or e
            raise Refused(f"oxconsole report: {journal}: cannot read the results journal: {why}") from None
        except NotAJournal as e:
            raise Refused(f"oxconsole report: {e}") from None

    def compare(self, journals: Sequence[str]) -> dict[str, Any]:
        """What `oxconsole report A B ... --json` gives."""
        from oxconsole.reports.compare import compare, load_run

        if len(journals) < 2:
            raise Refused(f"compare: expected two or more journals, got {len(journals)}")
        runs = []
        for path in journals:
            try:
                runs.append(load_run(path))
            except OSError as e:
                why = e.strerror or e
                raise Refused(f"oxconsole report: {path}: cannot read the results journal: {why}") from None
        return compare(runs)

    async def close(self) -> None:
        for src in list(self._sources.values()):
            await src.close()
        self._sources.clear()

    # --- connections -----------------------------------------------------------------------------
    async def _going(self, name: str) -> tuple[SocketSource, str] | dict[str, Any]:
        """The run going by that name (its source and key), or its final summary once it ended."""
        ended = self._ended.get(name)
        if ended is not None:
            return ended
        try:
            return await self._source(name)
        except _Ended:
            return self._ended[name]

    async def _source(self, name: str) -> tuple[SocketSource, str]:
        try:
            entry = pick_run(list_runs(), name)
        except Refused:
            if self._left(name) is not None:
                raise _Ended(name) from None
            raise
        if entry.results_path:
            self._remember(entry.key, entry.name, entry.results_path)
        src = self._sources.get(entry.key)
        if src is not None and src.connected:
            return src, entry.key
        src = SocketSource.from_entry(entry, hz=MIN_HZ, by="agent")
        try:
            await src.start()
        except (OSError, TimeoutError) as e:
            raise Refused(f"{entry.key}: cannot reach the run's control socket ({e})") from None
        self._sources[entry.key] = src
        return src, entry.key

    def _remember(self, key: str, name: str, journal: str) -> None:
        for k in (key, name):
            self._journals[k] = journal
            self._keys[k] = key

    def _left(self, name: str) -> dict[str, Any] | None:
        """The summary a run known here left beside its journal when it ended unseen; None when
        it is not known here or left none."""
        journal = self._journals.get(name)
        if journal is None:
            return None
        from oxconsole.cli.prepare import SUMMARY_NAME
        from oxconsole.reports.outputs import beside_journal

        path = beside_journal(Path(journal).resolve(), SUMMARY_NAME)
        try:
            summary = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(summary, dict):
            return None
        key = self._keys.get(name, name)
        final = {"run": key, "state": "done", **summary}
        self._ended[key] = final
        self._ended.setdefault(name, final)
        return final

    async def _ask(self, src: SocketSource, key: str, msg: dict[str, Any]) -> dict[str, Any] | None:
        """The run's answer; None when it ended first (its final summary then kept in `_ended`).
        A refusal raises `Refused` with the run's words."""
        try:
            reply = await src.ask(msg, ASK_S)
        except (ConnectionError, TimeoutError):
            reply = None
        if reply is None or src.ended:
            self._keep_end(src, key)
        if reply is None:
            return None
        if reply.get("op") == "error":
            message = str(reply.get("message"))
            if message == "the run has ended":
                await src.wait_end(ASK_S)
                self._keep_end(src, key)
                return None
            raise Refused(message)
        return reply

    def _keep_end(self, src: SocketSource, key: str) -> None:
        if src.ended and src.final_summary is not None:
            final = {"run": key, "state": "done", "exit_code": src.exit_code, **src.final_summary}
            self._ended[key] = final
            self._ended.setdefault(src.name, final)
            self._sources.pop(key, None)

    def _gone(self, name: str) -> dict[str, Any]:
        raise Refused(
            f"{name}: the run has ended and its end was not seen here; `summary` with its journal "
            "gives its figures"
        )
