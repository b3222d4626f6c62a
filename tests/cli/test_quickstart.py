"""Without a file: `oxconsole run --url ...` builds the workload from flags (the first model
`GET URL/models` lists when no `--model`), `--save` writes it as TOML for the next run, flags over
a file are `--set`s of it, `oxconsole init` writes a starter that validates and is never written
over. The real command line, against the simulator and a small loopback server of our own."""

from __future__ import annotations

import http.server
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support import free_port, oxconsole_here, read_jsonl
from tests.support.workloads import write_workload


class _Models(http.server.BaseHTTPRequestHandler):
    """GET /v1/models answers `self.server.answer` (status, JSON body); headers seen are kept."""

    def do_GET(self) -> None:
        server: Any = self.server
        server.seen.append((self.path, self.headers.get("Authorization")))
        status, body = server.answer
        data = orjson.dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # no such route: 404 with an empty body
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def models_server() -> Iterator[Any]:
    server: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    server.seen = []
    server.answer = (200, {"object": "list", "data": [{"id": "org/served-7b"}, {"id": "other"}]})
    server.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_run_url_sim_builds_runs_and_saves(tmp_path: Path) -> None:
    args = ["run", "--url", "sim", "--requests", "6", "--input-tokens", "16", "--output-tokens", "8"]
    r = oxconsole_here(*args, "--headless", "--save", "quick.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    records = read_jsonl(tmp_path / "runs" / "sim" / "results.jsonl")
    assert len(records) == 6 and {x["status"] for x in records} == {"ok"}, records
    assert {x["output_tokens"] for x in records} == {8}, "the simulator answers --output-tokens"
    saved = tomllib.loads((tmp_path / "quick.toml").read_text())
    assert saved["prompts"]["synthetic"] == {"count": 6, "input_tokens": 16, "output_tokens": 8}, saved
    assert [m["name"] for m in saved["models"]] == ["sim"], saved
    again = oxconsole_here("quick.toml", "--headless", "--resume", cwd=tmp_path)  # the next run is a file
    assert again.returncode == 0, again.stderr
    assert "resuming: 6 request(s) already ok" in again.stderr, again.stderr
    assert len(read_jsonl(tmp_path / "runs" / "sim" / "results.jsonl")) == 6


def test_without_a_file_the_defaults(tmp_path: Path) -> None:
    r = oxconsole_here("validate", "--url", "sim", "--save", "w.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "100 prompts" in r.stdout and "requests: 100" in r.stdout, r.stdout
    syn = tomllib.loads((tmp_path / "w.toml").read_text())["prompts"]["synthetic"]
    assert (syn["input_tokens"], syn["output_tokens"]) == (256, 128), syn
    assert not (tmp_path / "runs").exists(), "validate sent nothing and wrote no journal"


def test_first_model_from_get_models_with_the_key(
    tmp_path: Path, models_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QS_KEY", "sk-secret-123")
    args = ["validate", "--url", models_server.url, "--api-key-env", "QS_KEY", "--concurrency", "3"]
    r = oxconsole_here(*args, "--save", "w.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert models_server.seen == [("/v1/models", "Bearer sk-secret-123")], models_server.seen
    text = (tmp_path / "w.toml").read_text()
    assert "sk-secret-123" not in text, "a key never lands in a saved file"
    saved = tomllib.loads(text)
    assert [m["name"] for m in saved["models"]] == ["org/served-7b"], saved
    assert saved["name"] == "served-7b" and saved["run"] == {"concurrency": 3}, saved
    assert saved["endpoints"]["default"] == {"base_url": models_server.url, "api_key_env": "QS_KEY"}


@pytest.mark.parametrize(
    ("answer", "url_tail", "said"),
    [
        ((200, {"object": "list", "data": []}), "/v1", "lists no models; expected at least one"),
        ((200, {"data": [{"id": 7}, {"name": "x"}]}), "/v1", "lists no models"),
        ((200, {"models": ["x"]}), "/v1", 'got no "data" list'),
        (
            (404, {"error": "no"}),
            "",
            "HTTP 404; expected the list of models: the base URL usually ends in /v1",
        ),
        ((401, {"error": "no"}), "/v1", "HTTP 401; expected the list of models: is the key right"),
    ],
)
def test_get_models_that_gives_no_model_is_exit_2(
    tmp_path: Path, models_server: Any, answer: Any, url_tail: str, said: str
) -> None:
    models_server.answer = answer
    url = models_server.url.removesuffix("/v1") + url_tail
    r = oxconsole_here("run", "--url", url, "--headless", cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert said in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "runs").exists()


def test_no_server_says_is_it_running(tmp_path: Path) -> None:
    port = free_port()
    r = oxconsole_here("run", "--url", f"http://127.0.0.1:{port}/v1", "--headless", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert f"connection refused at 127.0.0.1:{port}; is the server running?" in r.stderr, r.stderr


def test_bad_flags_are_all_named(tmp_path: Path) -> None:
    r = oxconsole_here(
        "run", "--url", "sim", "--requests", "0", "--duration", "5s", "--concurrency", "0", cwd=tmp_path
    )
    assert r.returncode == 2, r.stderr
    for said in ("--concurrency: expected an integer >= 1, got 0", "--requests: expected an integer >= 1",
                 "--requests and --duration: expected one of them"):  # fmt: skip
        assert said in r.stderr, (said, r.stderr)
    r = oxconsole_here("run", "--url", "localhost:8000", cwd=tmp_path)
    assert r.returncode == 2 and '--url: expected http(s)://HOST[:PORT]/v1 or "sim"' in r.stderr, r.stderr
    r = oxconsole_here("run", "--headless", cwd=tmp_path)
    assert r.returncode == 2 and "expected a WORKLOAD.toml, or --url URL" in r.stderr, r.stderr


def test_save_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "w.toml").write_text("# mine\n")
    r = oxconsole_here("run", "--url", "sim", "--save", "w.toml", "--headless", cwd=tmp_path)
    assert r.returncode == 2 and "w.toml: --save: expected a path with no file yet" in r.stderr, r.stderr
    assert (tmp_path / "w.toml").read_text() == "# mine\n"


def test_flags_over_a_file_are_set_overrides(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "y"}\n')
    local = {"local": {"base_url": "http://127.0.0.1:9/v1"}}
    sets = {
        "name": "f",
        "endpoints": local,
        "prompts": {"file": "prompts.jsonl", "repeat": 5},
        "output.results": None,
    }
    write_workload("minimal", tmp_path, sets, file="w.toml")
    args = ["validate", "w.toml", "--url", "sim", "--concurrency", "7", "--requests", "3", "--model", "n"]
    r = oxconsole_here(*args, "--save", "out/saved.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "concurrency 7" in r.stdout and "requests: 3" in r.stdout and "sim (embedded" in r.stdout, r.stdout
    saved = tomllib.loads((tmp_path / "out" / "saved.toml").read_text())
    assert saved["endpoints"]["local"]["base_url"] == "sim" and saved["models"][0]["name"] == "n", saved
    run = oxconsole_here("run", "out/saved.toml", "--headless", cwd=tmp_path)  # the prompts file found
    assert run.returncode == 0, run.stderr
    assert len(read_jsonl(tmp_path / "runs" / "f" / "results.jsonl")) == 3


def test_one_endpoint_of_any_name_needs_no_endpoint_key(tmp_path: Path) -> None:
    sets = {"endpoints": {"local": {"base_url": "sim"}}, "prompts.items": ["a"], "output.results": None}
    write_workload("minimal", tmp_path, sets, file="w.toml")
    r = oxconsole_here("validate", "w.toml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "m  endpoint local" in r.stdout, r.stdout


def test_init_writes_a_starter_that_validates_and_never_overwrites(tmp_path: Path) -> None:
    r = oxconsole_here("init", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    written = (tmp_path / "workload.toml").read_text()
    assert written.count("#") > 15, "a commented starter"
    v = oxconsole_here("validate", "workload.toml", cwd=tmp_path)
    assert v.returncode == 0, v.stderr
    again = oxconsole_here("init", cwd=tmp_path)
    assert again.returncode == 2 and "never overwritten" in again.stderr, again.stderr
    assert (tmp_path / "workload.toml").read_text() == written
    other = oxconsole_here("init", "sub.toml", cwd=tmp_path)
    assert other.returncode == 0 and (tmp_path / "sub.toml").exists(), other.stderr


def test_an_unknown_theme_is_bad_input_even_headless(tmp_path: Path) -> None:
    r = oxconsole_here("run", "--url", "sim", "--theme", "nosuch", "--headless", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "--theme: expected one of " in r.stderr and "dark" in r.stderr and '"nosuch"' in r.stderr, r.stderr
    assert not (tmp_path / "runs").exists()


def test_every_shipped_theme_is_a_theme_the_flag_takes() -> None:
    """The themes oxconsole ships (oxconsole/ui/themes) are among the names `--theme` accepts, read
    without starting the console."""
    import tomllib

    from oxconsole.cli.main import theme_names

    shipped = {
        tomllib.loads(p.read_text())["name"]
        for p in (Path(__file__).resolve().parents[2] / "oxconsole" / "ui" / "themes").glob("*.toml")
    }
    assert shipped and shipped <= theme_names(), (shipped, sorted(theme_names()))


def test_request_errors_say_what_was_asked(tmp_path: Path, models_server: Any) -> None:
    """A 404 says which request drew it and the /v1 hint; a server that refuses the connections
    opened before the first request is bad input asking whether it is running, nothing sent."""
    base = models_server.url.removesuffix("/v1")
    one = ["--model", "x", "--requests", "1", "--headless", "--set", "retry.max_attempts=1"]
    r = oxconsole_here("run", "--url", base, *one, "--output", "a.jsonl", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    [rec] = read_jsonl(tmp_path / "a.jsonl")
    assert rec["error"] == "http_404", rec
    assert "HTTP 404: no reason given for POST /chat/completions" in rec["error_detail"], rec
    assert "missing /v1?" in rec["error_detail"], rec
    port = free_port()
    r = oxconsole_here(
        "run", "--url", f"http://127.0.0.1:{port}/v1", *one, "--output", "b.jsonl", cwd=tmp_path
    )
    assert r.returncode == 2, r.stderr
    assert f"connection refused at 127.0.0.1:{port}: is the server running?" in r.stderr, r.stderr
    assert "endpoints.default.base_url" in r.stderr, r.stderr
    assert not (tmp_path / "b.jsonl").exists() or not read_jsonl(tmp_path / "b.jsonl")


def test_an_embeddings_run_shows_input_tokens_per_second(tmp_path: Path) -> None:
    items = ["one two three four five six seven eight", "nine ten"]
    sets = {"models.0": {"name": "e", "api": "embeddings"}, "prompts": {"items": items, "repeat": 3}}
    write_workload("minimal", tmp_path, {**sets, "output.results": None}, file="w.toml")
    r = oxconsole_here("w.toml", "--headless", "--summary-json", "s.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = orjson.loads((tmp_path / "s.json").read_bytes())
    want = summary["tokens"]["input"] / summary["duration_s"]
    assert summary["tokens"]["output"] == 0 and want > 0, summary["tokens"]
    [rate] = [ln for ln in r.stdout.splitlines() if ln.startswith("rate")]
    assert "output tok/s" not in rate and rate.endswith(" input tok/s"), rate
    assert float(rate.split()[-3].replace(",", "")) == pytest.approx(want, rel=0.01, abs=0.1), rate
