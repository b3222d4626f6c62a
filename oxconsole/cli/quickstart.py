"""`oxconsole run` without a file: a workload built from flags (`--url`, `--model`, lengths or a
prompts file), and with a file those flags as `--set` overrides of it.

Why this module exists: a first run should need no file (`oxconsole run --url http://host/v1`),
yet everything after it (the engine process, `--resume`, the hint that continues a stopped run)
reads a workload file. So the flags become one TOML document, written with tomli-w where the
next run can use it: `--save PATH`, else beside the run's journal (`runs/NAME/workload.toml`).
The command line decides nothing else here; the run itself is the same as for any file.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import tempfile
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from oxconsole.base.exits import BadInput
from oxconsole.cli.modellist import first_model

__all__ = ["add_flags", "workload_for", "workload_to_validate"]

DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS, DEFAULT_REQUESTS = 256, 128, 100
"""Synthetic prompts without a file: the lengths and count the peers' quick starts use."""
SIM_MODEL = "sim"
"""The model `--url sim` runs without `--model` (the simulator serves any name)."""
FORMATS = ("jsonl", "sharegpt", "openai-batch")


def add_flags(p: argparse.ArgumentParser) -> None:
    """The flags that build a workload (or override one given as a file)."""
    g = p.add_argument_group("without a file (with one: the same as --set of these keys)")
    g.add_argument("--url", metavar="URL", help='the endpoint\'s base URL (http(s)://HOST/v1, or "sim")')
    g.add_argument(
        "--model",
        dest="models",
        action="append",
        default=[],
        metavar="NAME",
        help="a model on that endpoint, weight 1 each (repeatable); absent: the first GET URL/models lists",
    )
    g.add_argument("--api-key-env", metavar="VAR", help="the environment variable holding the API key")
    g.add_argument("--concurrency", type=int, metavar="N", help="max requests in flight (run.concurrency)")
    g.add_argument("--rate", type=float, metavar="R", help="requests/s (run.rate; 0 = unlimited)")
    g.add_argument("--requests", type=int, metavar="N", help=f"requests to send (default {DEFAULT_REQUESTS})")
    g.add_argument("--duration", metavar="D", help='wall-clock cap instead ("90s", "10m")')
    g.add_argument(
        "--input-tokens",
        type=int,
        metavar="N",
        help=f"synthetic prompt length (default {DEFAULT_INPUT_TOKENS})",
    )
    g.add_argument(
        "--output-tokens", type=int, metavar="N", help=f"tokens to ask for (default {DEFAULT_OUTPUT_TOKENS})"
    )
    g.add_argument("--prompts", metavar="FILE", help="a prompts file instead of synthetic prompts")
    g.add_argument(
        "--prompts-format", choices=FORMATS, help="the prompts file's format (default: by its content)"
    )
    g.add_argument(
        "--save", metavar="PATH", help="also write the workload as TOML to PATH (never over a file)"
    )


def _given(ns: argparse.Namespace) -> bool:
    keys = ("url", "api_key_env", "concurrency", "rate", "requests", "duration", "input_tokens")
    more = ("output_tokens", "prompts", "prompts_format", "save")
    return bool(ns.models) or any(getattr(ns, k) is not None for k in keys + more)


def workload_for(ns: argparse.Namespace, argv: list[str]) -> str:
    """The workload file a run of these flags reads: the one given (the flags added to
    `ns.overrides` as `--set`s, and `--save` writing the result), or one built from the flags."""
    _check_numbers(ns)
    if ns.workload is not None:
        if _given(ns):
            ns.overrides[:0] = _as_overrides(ns)
            if ns.save:
                _save_overridden(Path(ns.save), ns.workload, ns.overrides)
        return str(ns.workload)
    if not ns.url:
        raise BadInput("expected a WORKLOAD.toml, or --url URL to build one (oxconsole run --url sim)")
    raw = build(ns)
    if ns.save:
        path = Path(ns.save)
        _refuse_existing(path)
    else:
        path = _beside_journal(ns.output, raw["name"])
    write_workload(path, raw, argv)
    return str(path)


@contextmanager
def workload_to_validate(ns: argparse.Namespace, argv: list[str]) -> Iterator[str]:
    """`validate` of flags: the file given, `--save PATH` written, or a temporary file; nothing is
    sent either way."""
    if ns.workload is not None or ns.save:
        yield workload_for(ns, argv)
        return
    if not ns.url:
        raise BadInput("expected a WORKLOAD.toml, or --url URL to build one")
    _check_numbers(ns)
    raw = build(ns)
    with tempfile.TemporaryDirectory(prefix="oxconsole-") as d:
        path = Path(d) / "workload.toml"
        write_workload(path, raw, argv)
        yield str(path)


def _check_numbers(ns: argparse.Namespace) -> None:
    problems = [
        f"--{flag.replace('_', '-')}: expected an integer >= 1, got {value}"
        for flag in ("concurrency", "requests", "input_tokens", "output_tokens")
        if (value := getattr(ns, flag)) is not None and value < 1
    ]
    if ns.rate is not None and not (ns.rate >= 0 and ns.rate != float("inf")):
        problems.append(f"--rate: expected requests/s >= 0 (0 = unlimited), got {ns.rate}")
    if ns.requests is not None and ns.duration is not None:
        problems.append("--requests and --duration: expected one of them (a count or a time), got both")
    if ns.prompts is not None and (ns.input_tokens is not None):
        problems.append(
            "--input-tokens and --prompts: expected one of them (synthetic prompts or a file), got both"
        )
    if ns.prompts_format is not None and ns.prompts is None:
        problems.append("--prompts-format: expected --prompts FILE with it")
    if problems:
        raise BadInput("\n".join(problems))


# --- a workload from flags -------------------------------------------------------------------------
def build(ns: argparse.Namespace) -> dict[str, Any]:
    """The workload document the flags describe (as tomllib would read it)."""
    url = ns.url.strip()
    sim = url == "sim"
    if not sim and not url.startswith(("http://", "https://")):
        raise BadInput(f'--url: expected http(s)://HOST[:PORT]/v1 or "sim", got {json.dumps(url)}')
    models: list[str] = list(ns.models) or [SIM_MODEL if sim else first_model(url, ns.api_key_env)]
    endpoint: dict[str, Any] = {"base_url": url}
    if ns.api_key_env:
        endpoint["api_key_env"] = ns.api_key_env
    run: dict[str, Any] = {}
    for key in ("concurrency", "rate", "duration"):
        if getattr(ns, key) is not None:
            run[key] = getattr(ns, key)
    out_tokens = ns.output_tokens or DEFAULT_OUTPUT_TOKENS
    if ns.prompts is not None:
        if ns.requests is not None:
            run["requests"] = ns.requests
        prompts: dict[str, Any] = {"file": str(Path(ns.prompts).resolve())}
        fmt = ns.prompts_format or sniff_format(Path(ns.prompts))
        if fmt != "jsonl":
            prompts["format"] = fmt
    else:
        count = ns.requests or DEFAULT_REQUESTS
        ins = ns.input_tokens or DEFAULT_INPUT_TOKENS
        prompts = {"synthetic": {"count": count, "input_tokens": ins, "output_tokens": out_tokens}}
    raw: dict[str, Any] = {"name": _name(models[0])}
    if run:
        raw["run"] = run
    raw["endpoints"] = {"default": endpoint}
    raw["models"] = [{"name": m} | _max_tokens(ns) for m in models]
    raw["prompts"] = prompts
    if sim:  # the simulator answers as many tokens as asked, not its default 64
        raw["sim"] = {"models": {m: {"output_tokens": out_tokens} for m in models}}
    return raw


def _max_tokens(ns: argparse.Namespace) -> dict[str, Any]:
    """A prompts file's requests ask for `--output-tokens` when given (synthetic ones carry theirs)."""
    return {"max_tokens": ns.output_tokens} if ns.prompts is not None and ns.output_tokens else {}


def _name(model: str) -> str:
    from oxconsole.workload.bounds import name_from_stem

    return name_from_stem(model.rsplit("/", 1)[-1])


def sniff_format(path: Path) -> str:
    """A prompts file's format by its name and first entry: ShareGPT (`.json`, or `conversations`),
    OpenAI Batch input (`custom_id`), else oxconsole's JSONL."""
    if path.suffix.lower() == ".json":
        return "sharegpt"
    try:
        with open(path, "rb") as f:
            head = f.read(64 * 1024)
    except OSError:
        return "jsonl"  # the loader names the file and why it cannot be read
    first = next((line for line in head.splitlines() if line.strip()), b"")
    if b'"custom_id"' in first:
        return "openai-batch"
    if b'"conversations"' in first:
        return "sharegpt"
    return "jsonl"


def _beside_journal(output: str | None, name: str) -> Path:
    from oxconsole.reports.outputs import beside_journal

    results = Path(output) if output else Path("runs") / name / "results.jsonl"
    return beside_journal(results, "workload.toml")


def _refuse_existing(path: Path) -> None:
    if path.exists() or path.is_symlink():
        raise BadInput(
            f"{path}: --save: expected a path with no file yet (a file is never overwritten), found one"
        )


def write_workload(path: Path, raw: dict[str, Any], argv: list[str]) -> None:
    """The document as TOML (tomli-w), headed by the command that built it; never a secret in it
    (keys stay in the environment: only the variable's name is written)."""
    import tomli_w

    head = (
        f"# written by: oxconsole {shlex.join(argv)}\n"
        f"# run it again with: oxconsole {shlex.quote(str(path))}\n\n"
    )
    body = tomli_w.dumps(_relative_prompts(raw, path.parent))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(head + body)
    except OSError as e:
        raise BadInput(
            f"{path}: expected a file the workload can be written to, but {e.strerror or e}"
        ) from None


def _relative_prompts(raw: dict[str, Any], folder: Path) -> dict[str, Any]:
    """A prompts file named relative to the workload's folder (where the loader looks), so a saved
    workload and its prompts can move together."""
    prompts = raw.get("prompts")
    if not isinstance(prompts, dict) or not isinstance(prompts.get("file"), str):
        return raw
    try:
        rel = os.path.relpath(prompts["file"], folder.resolve())
    except ValueError:  # another drive (Windows): absolute it stays
        return raw
    return {**raw, "prompts": {**prompts, "file": rel}}


# --- flags over a file -----------------------------------------------------------------------------
def _as_overrides(ns: argparse.Namespace) -> list[str]:
    """The flags given with a workload file, as the `--set`s they stand for."""
    raw = _read_raw(ns.workload)
    sets: list[str] = []
    for flag, key in (("concurrency", "run.concurrency"), ("rate", "run.rate"), ("requests", "run.requests")):
        if getattr(ns, flag) is not None:
            sets.append(f"{key}={getattr(ns, flag)}")
    if ns.duration is not None:
        sets.append(f"run.duration={json.dumps(ns.duration)}")
    for flag, key in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens")):
        if getattr(ns, flag) is not None:
            sets.append(f"prompts.synthetic.{key}={getattr(ns, flag)}")
    if ns.prompts is not None:
        sets.append(f"prompts.file={json.dumps(str(Path(ns.prompts).resolve()))}")
    if ns.prompts_format is not None:
        sets.append(f"prompts.format={json.dumps(ns.prompts_format)}")
    if ns.url is not None or ns.api_key_env is not None:
        ep = _only(raw, "endpoints", "--url and --api-key-env")
        if ns.url is not None:
            sets.append(f"endpoints.{json.dumps(ep)}.base_url={json.dumps(ns.url)}")
        if ns.api_key_env is not None:
            sets.append(f"endpoints.{json.dumps(ep)}.api_key_env={json.dumps(ns.api_key_env)}")
    if ns.models:
        models = raw.get("models")
        if len(ns.models) != 1 or not isinstance(models, list) or len(models) != 1:
            raise BadInput(
                f"{ns.workload}: --model: expected one --model over a workload with one [[models]] "
                "(it renames that model); set others with --set 'models.NAME.KEY=VALUE'"
            )
        sets.append(f"models.0.name={json.dumps(ns.models[0])}")
    return sets


def _read_raw(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}  # the loader says what is wrong with it, naming the file


def _only(raw: dict[str, Any], table: str, flags: str) -> str:
    names = list(raw.get(table) or {}) if isinstance(raw.get(table), dict) else []
    if len(names) != 1:
        raise BadInput(
            f"{flags}: expected a workload with one [{table}.NAME] table to apply them to, "
            f"got {len(names)}; use --set '{table}.NAME.KEY=VALUE'"
        )
    return str(names[0])


def _save_overridden(path: Path, workload: str, overrides: list[str]) -> None:
    """`--save` with a file: the file with every override applied (checked by the loader first)."""
    from oxconsole.workload import WorkloadError, apply_override, load_workload

    _refuse_existing(path)
    try:
        load_workload(workload, overrides)
    except WorkloadError as e:
        raise BadInput(str(e)) from None
    raw = _read_raw(workload)
    for o in overrides:
        apply_override(raw, o, workload)
    prompts = raw.get("prompts")
    if isinstance(prompts, dict) and isinstance(prompts.get("file"), str):
        prompts["file"] = str((Path(workload).parent / prompts["file"]).resolve())
    write_workload(path, raw, ["run", workload, *[a for o in overrides for a in ("--set", o)]])
