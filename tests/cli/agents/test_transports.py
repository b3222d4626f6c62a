"""`oxconsole mcp` as an agent's host starts it: a process on stdio (the SDK's stdio client), and
`--http` on loopback behind the bearer token (the SDK's streamable HTTP client); the refusals of
the command itself (an address beyond loopback, no token) with exit 2, the token never echoed."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ResourceUpdatedNotification

from oxconsole.cli.agents.launch import TOKEN_ENV, BadAddress, parse_address
from oxconsole.cli.agents.watch import snapshot_uri
from tests.support.agents import data, headless_run, refusal

REPO = Path(__file__).resolve().parents[3]


def _env(token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    if token is not None:
        env[TOKEN_ENV] = token
    return env


async def test_stdio_serves_the_tools_and_a_runs_updates(run_dirs: Path, tmp_path: Path) -> None:
    with headless_run(tmp_path) as entry:
        # an agent host passes only a few variables: the runs' folders must be passed as well
        env = {
            k: os.environ[k] for k in ("XDG_RUNTIME_DIR", "XDG_STATE_HOME", "PYTHONPATH") if k in os.environ
        }
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "oxconsole", "mcp"], cwd=REPO, env=env
        )
        async with Client(params) as client:
            runs = data(await client.call_tool("runs"))["runs"]
            assert [r["pid"] for r in runs] == [entry.pid], runs
            out = data(await client.call_tool("set", {"name": entry.key, "concurrency": 6}))
            assert [(c["what"], c["to"], c["by"]) for c in out["changes"]] in (
                [("concurrency", 6, "agent")],
                [],
            ), out
            msg = refusal(await client.call_tool("set", {"name": entry.key, "concurrency": 0}))
            assert msg.startswith("set_concurrency: expected an integer >= 1"), msg
            uri = snapshot_uri(entry.key)
            async with client.listen(resource_subscriptions=[uri]) as sub:
                with anyio.fail_after(10):  # the server's own pace: once a second
                    async for event in sub:
                        assert getattr(event, "uri", None) == uri, event
                        break


@pytest.fixture
def token() -> str:
    return secrets.token_hex(32)


@pytest.fixture
def http_server(token: str, run_dirs: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "oxconsole", "mcp", "--http", "127.0.0.1:0"],
        cwd=REPO,
        env=_env(token),
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("oxconsole mcp: serving http://127.0.0.1:"), line
    try:
        yield line.split()[3], proc
    finally:
        proc.terminate()
        proc.wait(10)


async def test_http_requires_the_token_and_serves_with_it(
    http_server: tuple[str, subprocess.Popen[str]], token: str, tmp_path: Path
) -> None:
    url, proc = http_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx2.AsyncClient() as raw:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": f"Basic {token}"}):
            r = await raw.post(url, json=body, headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer"), r
            assert token not in r.text
        # the token is not all: the SDK's DNS-rebinding guard wants a loopback Host too
        headers = {"Authorization": f"Bearer {token}", "Host": "evil.test:80"}
        assert (await raw.post(url, json=body, headers=headers)).status_code == 421
    async with httpx2.AsyncClient() as anonymous:  # the SDK's client cannot even connect without it
        with pytest.raises(ExceptionGroup) as failed:
            async with Client(streamable_http_client(url, http_client=anonymous)) as client:
                await client.call_tool("runs")
        assert failed.group_contains(MCPError, match="Server returned an error response", depth=2)
    heard: list[str] = []

    async def on_message(message: object) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            heard.append(str(message.params.uri))

    with headless_run(tmp_path) as entry:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as authed:
            async with Client(streamable_http_client(url, http_client=authed)) as client:
                assert [r["pid"] for r in data(await client.call_tool("runs"))["runs"]] == [entry.pid]
                out = data(await client.call_tool("set", {"name": entry.key, "rate": 7.5}))
                assert [(c["to"], c["by"]) for c in out["changes"]] == [(7.5, "agent")], out
            async with Client(
                streamable_http_client(url, http_client=authed), mode="legacy", message_handler=on_message
            ) as client:  # 2025-11-25: a session, and notifications on its standalone stream
                assert client.protocol_version == "2025-11-25"
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await client.subscribe_resource(snapshot_uri(entry.key))
                with anyio.fail_after(10):
                    while not heard:
                        await anyio.sleep(0.05)
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    assert token not in err, err


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("0.0.0.0:8765", "expected a loopback address (127.0.0.1, ::1 or localhost), got 0.0.0.0"),
        ("[::]:8765", "expected a loopback address (127.0.0.1, ::1 or localhost), got ::"),
        ("192.168.1.5:8765", "got 192.168.1.5"),
        ("example.com:8765", "got the name 'example.com'"),
        ("8765", "expected HOST:PORT (such as 127.0.0.1:8765), got no host"),
        ("127.0.0.1:http", "expected a port number after ':', got 'http'"),
    ],
)
def test_only_loopback_is_served(address: str, why: str) -> None:
    with pytest.raises(BadAddress) as e:
        parse_address(address)
    assert why in str(e.value), str(e.value)


def test_loopback_forms() -> None:
    assert parse_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_address("localhost:8765") == ("127.0.0.1", 8765)
    assert parse_address("[::1]:8765") == ("::1", 8765)


@pytest.mark.parametrize(
    ("args", "token", "said"),
    [
        (
            ["--http", "0.0.0.0:8765"],
            "t0ken",
            "--http 0.0.0.0:8765: expected a loopback address",
        ),
        (["--http", "127.0.0.1:0"], None, f"--http: expected the bearer token in {TOKEN_ENV}"),
        (["--http", "127.0.0.1:0"], "  ", f"--http: expected the bearer token in {TOKEN_ENV}"),
        (
            ["--http", "127.0.0.1:0"],
            "s3cret tok\u00e9n",
            f"--http: expected {TOKEN_ENV} to hold",
        ),
    ],
)
def test_the_command_refuses_with_exit_2(args: list[str], token: str | None, said: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "oxconsole", "mcp", *args],
        cwd=REPO,
        env=_env(token),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and done.stderr.startswith(f"oxconsole mcp: {said}"), done
    assert done.stdout == "", done
    assert token is None or not token.strip() or token not in done.stderr  # never echoed
    assert "Traceback" not in done.stderr
