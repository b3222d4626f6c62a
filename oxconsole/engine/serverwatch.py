"""The server's side of a run: each endpoint's `/metrics` (and DCGM exporters) scraped beside the run.

Why this module exists: what the engine serving the run says about itself (running, waiting, KV
cache, its own rates and latencies) is read here, off the request path, and handed to the live
snapshot (`Gauges.server`), the series file beside the journal and the summary's `server` blocks.
Only the run's coordinator (`runner.Engine`) has one: worker processes and Ray actors never scrape,
so N workers do not ask the same server N times.

What a server answers must never cost the run anything, whatever it is:
- one task per endpoint on the coordinator's loop, on its own small aiohttp session (a scrape never
  waits behind requests for a pooled connection, nor takes one);
- each read is bounded: `FETCH_TIMEOUT_S` for the whole answer, at most `parse.MAX_BODY` bytes (a
  longer `Content-Length` is refused before reading); a large answer is parsed off the loop;
- a server that is slow to parse is asked less often (`pace.next_interval`: 2% of a core at most),
  one that fails is backed off up to 60 s;
- nothing here raises into the run: a failed round is counted and, at the start, said once
  (`advice.warning`), and stopping the run cancels the tasks at once, never waiting for an interval.

URLs: `server_metrics = "auto"` reads the base URL's scheme, host and port + "/metrics" (the
simulator's own address for `base_url = "sim"`); when that answers JSON (trtllm-serve), its
"/prometheus/metrics" is tried once. The endpoint's API key is sent only to the base URL's own
origin, and a URL's credentials are never shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import orjson
import yarl

from oxconsole.base.redaction import scrub
from oxconsole.base.safetext import shown
from oxconsole.engine.send import internals
from oxconsole.metrics.server.advice import NO_ENGINE, warning
from oxconsole.metrics.server.live import LiveServer
from oxconsole.metrics.server.pace import next_interval
from oxconsole.metrics.server.parse import MAX_BODY, Exposition, Failed, parse
from oxconsole.metrics.server.scrapes import Part, Reading, Scrape, read, read_gpus
from oxconsole.metrics.server.series import gpu_line, line
from oxconsole.metrics.server.spans import GpuSummary, Round, ServerSummary, phase_delta
from oxconsole.metrics.server.vocabulary import Engine
from oxconsole.workload import EndpointConfig, Workload, resolve_api_key

__all__ = [
    "FETCH_TIMEOUT_S",
    "INLINE_PARSE_MAX",
    "JSON_ANSWER",
    "ServerWatch",
    "fetch",
    "metrics_urls",
    "shown_url",
]

FETCH_TIMEOUT_S: Final = 2.0
"""The most a scrape's answer may take, headers to last byte (the contract's 2 s)."""
INLINE_PARSE_MAX: Final = 256 * 1024
"""Answers up to this size are parsed on the loop (a 200-series exposition of ~22 KB costs ~0.3 ms,
bench/bench_scrape.py); larger ones in a thread, so an 8 MiB answer (~180 ms) does not hold the
loop the requests are timed on."""
ACCEPT: Final = "text/plain;version=0.0.4;q=1.0, */*;q=0.1"
"""The classic text format (no protobuf, no OpenMetrics: what the parser reads)."""
JSON_ANSWER: Final = "a JSON answer, not Prometheus text"
JSON_ANSWER_FAILED: Final = Failed(JSON_ANSWER)
HEAD_BYTES: Final = 200
"""The part of a refusal's body quoted in the warning (llama-server's 501 names `--metrics`)."""
_PROMETHEUS_PATH: Final = "/prometheus/metrics"


def shown_url(url: str) -> str:
    """`url` without credentials (`http://user:pass@h/` -> `http://h/`), for every output."""
    try:
        u = yarl.URL(url)
    except ValueError:
        return url
    return str(u.with_user(None)) if u.user or u.password else url


def metrics_urls(ep: EndpointConfig, base_url: str) -> tuple[str, ...]:
    """The URLs `server_metrics` asks for: none when "off", the base URL's origin + "/metrics" when
    "auto" (`base_url`: where the endpoint is served, the simulator's for "sim")."""
    if ep.server_metrics == "off":
        return ()
    if ep.server_metrics == "auto":
        if not base_url.startswith(("http://", "https://")):
            return ()
        return (str(yarl.URL(base_url).origin().with_path("/metrics")),)
    return tuple(ep.server_metrics) if not isinstance(ep.server_metrics, str) else (ep.server_metrics,)


def _origin(url: str) -> yarl.URL | None:
    try:
        return yarl.URL(url).origin()
    except ValueError:
        return None


async def fetch(
    session: aiohttp.ClientSession, url: str, headers: Mapping[str, str], ssl: Any = True
) -> bytes | Failed:
    """The answer's body, read within `FETCH_TIMEOUT_S` and `MAX_BODY`; else why not (never raises
    but for cancellation)."""
    try:
        async with asyncio.timeout(FETCH_TIMEOUT_S):
            async with session.get(url, headers=headers, ssl=ssl, allow_redirects=False) as resp:
                if resp.status != 200:  # its words, once safe to show: the warning quotes them
                    head = await resp.content.read(HEAD_BYTES)
                    key = headers.get("Authorization", "").removeprefix("Bearer ")
                    text = shown(scrub(head.decode("utf-8", "replace"), (key,) if key else (), HEAD_BYTES))
                    return Failed(f"HTTP {resp.status}" + (f": {text}" if text else ""))
                size = resp.content_length
                if size is not None and size > MAX_BODY:
                    return Failed(f"an answer of {size:,} bytes, over {MAX_BODY // 2**20} MiB")
                chunks: list[bytes] = []
                got = 0
                async for chunk in resp.content.iter_chunked(64 * 1024):
                    if not got and chunk[:64].lstrip()[:1] in (b"{", b"[", b'"'):
                        return JSON_ANSWER_FAILED  # not the text format: no need to read on
                    chunks.append(chunk)
                    got += len(chunk)
                    if got > MAX_BODY:  # refused before any copy: at most 8 MiB held
                        return Failed(f"an answer over {MAX_BODY // 2**20} MiB")
                return b"".join(chunks)
    except TimeoutError:
        return Failed(f"no whole answer within {FETCH_TIMEOUT_S:g} s")
    except aiohttp.ClientConnectorError as e:
        return Failed(f"cannot connect: {e.os_error.strerror or e.os_error}")
    except (aiohttp.ClientError, OSError, ValueError) as e:
        return Failed(f"a broken answer: {type(e).__name__}")


async def _parse(body: bytes | Failed) -> tuple[Exposition | Failed, float]:
    """`parse` on the loop for a small body, in a thread for a large one; its CPU time too."""
    if isinstance(body, Failed):
        return body, 0.0
    if len(body) <= INLINE_PARSE_MAX:
        t0 = time.thread_time()
        out = parse(body)
        return out, time.thread_time() - t0

    def timed() -> tuple[Exposition | Failed, float]:
        t0 = time.thread_time()
        got = parse(body)
        return got, time.thread_time() - t0

    return await asyncio.to_thread(timed)


@dataclass(slots=True)
class _Target:
    """One endpoint's URLs and what is known of them."""

    name: str
    urls: list[str]
    interval: float
    auto: bool
    headers: dict[str, dict[str, str]]
    """URL -> headers (the key only to the base URL's own origin)."""
    ssl: dict[str, Any]
    live: LiveServer
    run: ServerSummary
    phases: dict[int, ServerSummary] = field(default_factory=dict)
    engine: Engine | None = None
    warned: bool = False


class ServerWatch:
    """The scrape tasks of one run (`start`, then `await stop()`); `gauges`, `gpus` and `into`
    are read on the same loop."""

    def __init__(
        self,
        w: Workload,
        served: Mapping[str, str],
        warnings: list[str],
        *,
        series: Path | None = None,
        phase: Callable[[], int] = lambda: 0,
        ending: Callable[[], bool] = lambda: False,
        client: Callable[[], Mapping[str, int]] = dict,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.warnings = warnings
        self.phase = phase
        self.client = client
        """The run's requests in flight per endpoint now: kept with each round, so the engine's
        running + waiting is set against what the client had out when it was read, not later."""
        self.ending = ending
        """The run is over (its shards shut down, a simulator with them): a round that fails now
        is the end's, not the server's, and is not counted."""
        self.clock = clock
        self.series = series
        self._fd: int | None = None
        self.targets: list[_Target] = []
        used = {m.endpoint for m in w.models}
        for name, ep in w.endpoints.items():
            if name not in used:
                continue
            base = served.get(name, ep.base_url)
            urls = metrics_urls(ep, base)
            if not urls:
                continue
            key = resolve_api_key(w, name)
            home = _origin(base)
            headers: dict[str, dict[str, str]] = {}
            ssl: dict[str, Any] = {}
            for u in urls:
                h = {"Accept": ACCEPT}
                same = home is not None and _origin(u) == home
                if key and same:
                    h["Authorization"] = f"Bearer {key}"
                headers[u] = h
                ssl[u] = internals.ssl_context(not (ep.insecure and same)) if u.startswith("https") else True
            shown = [shown_url(u) for u in urls]
            self.targets.append(
                _Target(
                    name,
                    list(urls),
                    ep.server_metrics_interval,
                    ep.server_metrics == "auto",
                    headers,
                    ssl,
                    LiveServer(shown),
                    ServerSummary(shown[0] if len(shown) == 1 else shown),
                )
            )
        self.dcgm = list(w.telemetry.dcgm)
        self.gpu_latest: dict[str, dict[str, float]] = {}
        self.gpu_summary = GpuSummary()
        self._session: aiohttp.ClientSession | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def active(self) -> bool:
        return bool(self.targets or self.dcgm)

    # --- the tasks --------------------------------------------------------------------------------
    def start(self) -> None:
        """Open the session and the series file; one task per endpoint, one for the GPUs."""
        if not self.active:
            return
        n = sum(len(t.urls) for t in self.targets) + len(self.dcgm)
        connector = aiohttp.TCPConnector(limit=max(2, n), enable_cleanup_closed=True)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None),
            cookie_jar=aiohttp.DummyCookieJar(),
        )
        if self.series is not None:
            try:
                self.series.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.series, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            except OSError as e:
                self.warnings.append(f"{self.series}: the server series cannot be written: {e.strerror or e}")
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._watch(t)) for t in self.targets]
        if self.dcgm:
            self._tasks.append(loop.create_task(self._watch_gpus()))

    async def stop(self) -> None:
        """Cancel the tasks now (a scrape in flight is dropped), close the session and the file."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(BaseException):
                await task
        self._tasks = []
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session.close()
            self._session = None
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    async def _round(self, t: _Target) -> tuple[tuple[Part, ...], float]:
        """Every URL of the endpoint fetched at once and parsed: the parts, and the CPU they cost."""
        assert self._session is not None
        session = self._session
        bodies = await asyncio.gather(*(fetch(session, u, t.headers[u], t.ssl[u]) for u in t.urls))
        if t.auto and bodies[0] is JSON_ANSWER_FAILED:  # trtllm-serve: its text is elsewhere
            alt = str(yarl.URL(t.urls[0]).with_path(_PROMETHEUS_PATH))
            t.headers[alt], t.ssl[alt] = t.headers[t.urls[0]], t.ssl[t.urls[0]]
            t.urls[0], t.auto = alt, False
            t.live.urls[0] = shown_url(alt)
            t.run.url = shown_url(alt)
            bodies[0] = await fetch(session, alt, t.headers[alt], t.ssl[alt])
        parsed = [await _parse(b) for b in bodies]
        parts = tuple(Part(shown_url(u), p) for u, (p, _) in zip(t.urls, parsed, strict=True))
        return parts, sum(c for _, c in parsed)

    async def _watch(self, t: _Target) -> None:
        loop = asyncio.get_running_loop()
        before: Scrape | None = None
        failures = 0
        while True:
            start = loop.time()
            try:
                parts, cost = await self._round(t)
                now = Scrape(loop.time(), parts)
                r = read(now, before, engine=t.engine)
            except Exception as e:  # a bug here must never end the run: the round counts as failed
                r = read(Scrape(loop.time(), tuple(Part(shown_url(u), Failed(repr(e))) for u in t.urls)))
                cost, now = 0.0, None
            if not r.answered and self.ending():
                return
            if r.answered and now is not None:
                before = now
                if t.engine is None and r.engine != "unknown":
                    t.engine = r.engine
            self._record(t, now.t if now is not None else loop.time(), r)
            failures = 0 if r.answered else failures + 1
            wait = next_interval(t.interval, cost, failures)
            await asyncio.sleep(max(0.0, start + wait - loop.time()))

    def _record(self, t: _Target, mono: float, r: Reading) -> None:
        """A round to the live gauge, the run's and the phase's summaries, the series; the first
        round's warning."""
        t.live.add(mono, r, self.client().get(t.name))
        rnd = Round.of(r)
        t.run.add(rnd)
        phase = self.phase()
        s = t.phases.get(phase)
        if s is None:
            s = t.phases[phase] = ServerSummary(t.run.url)
        s.add(rnd)
        self._write(line(self.clock(), t.name, r, t.run.url))
        if not t.warned:
            t.warned = True
            failures = list(r.failed)
            if r.answered and r.engine == "unknown":
                down = {u for u, _ in r.failed}
                failures += [(u, NO_ENGINE) for u in t.live.urls if u not in down]
            if failures:
                self.warnings.append(warning(t.name, failures, len(t.urls)))

    async def _watch_gpus(self) -> None:
        assert self._session is not None
        loop = asyncio.get_running_loop()
        failures = 0
        warned = False
        interval = min((t.interval for t in self.targets), default=1.0)
        while True:
            start = loop.time()
            bodies = await asyncio.gather(*(fetch(self._session, u, {"Accept": ACCEPT}) for u in self.dcgm))
            parsed = [await _parse(b) for b in bodies]
            cost = sum(c for _, c in parsed)
            now = self.clock()
            failed = []
            for u, (p, _) in zip(self.dcgm, parsed, strict=True):
                if isinstance(p, Failed):
                    failed.append((shown_url(u), p.reason))
                    continue
                for gpu, g in read_gpus(Scrape(start, (Part(u, p),))).items():
                    figs = {"gpu_util": g.gpu_util, "gpu_mem_used_mb": g.gpu_mem_used_mb,
                            "gpu_power_w": g.gpu_power_w}  # fmt: skip
                    self.gpu_latest[gpu] = {k: v for k, v in figs.items() if v is not None}
                    self.gpu_summary.add(gpu, figs)
                    self._write(gpu_line(now, shown_url(u), gpu, g))
            if failed and not warned:
                warned = True
                url, why = failed[0]
                self.warnings.append(
                    f"telemetry.dcgm: {url} answered {why}: no GPU figures from it "
                    "(a DCGM exporter serves them on port 9400)"
                )
            failures = failures + 1 if len(failed) == len(self.dcgm) else 0
            await asyncio.sleep(max(0.0, start + next_interval(interval, cost, failures) - loop.time()))

    def _write(self, d: dict[str, Any]) -> None:
        """One whole line to the series (O_APPEND: a reader never sees half of one); a failed
        write stops the series with a warning, never the run."""
        if self._fd is None:
            return
        try:
            os.write(self._fd, orjson.dumps(d, option=orjson.OPT_APPEND_NEWLINE))
        except (OSError, TypeError) as e:
            self.warnings.append(
                f"{self.series}: the server series stopped: {getattr(e, 'strerror', e) or e}"
            )
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    # --- what the run reads ------------------------------------------------------------------------
    def gauges(self) -> dict[str, dict[str, Any]] | None:
        """Each endpoint's live figures (`LiveServer.gauge`); None without any."""
        if not self.targets:
            return None
        now = asyncio.get_running_loop().time()
        return {t.name: t.live.gauge(now) for t in self.targets}

    def gpus(self) -> dict[str, dict[str, float]] | None:
        return dict(self.gpu_latest) if self.gpu_latest else None

    def into(self, summary: dict[str, Any]) -> None:
        """The summary's `server` (per endpoint), each phase's (with its `delta` against the phase
        before), and `gpus`."""
        if self.targets:
            summary["server"] = {t.name: t.run.as_dict() for t in self.targets}
        phases = summary.get("phases")
        if isinstance(phases, list) and self.targets:
            before: dict[str, dict[str, Any]] = {}
            for i, ph in enumerate(phases):
                if not isinstance(ph, dict):
                    continue
                block: dict[str, Any] = {}
                for t in self.targets:
                    s = t.phases.get(i)
                    if s is None:
                        continue
                    d = s.as_dict()
                    if t.name in before:
                        d["delta"] = phase_delta(before[t.name], d)
                    before[t.name] = d
                    block[t.name] = d
                if block:
                    ph["server"] = block
        gpus = self.gpu_summary.as_dict()
        if gpus:
            summary["gpus"] = gpus
