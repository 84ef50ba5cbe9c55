"""Asking one hook: its command (argv, no shell, a scrubbed environment, stdin in, stdout out)
or its URL (one POST, no redirects). Either way the answer is at most `MAX_ANSWER` bytes and
`HookFailure` says why there is none; the caller bounds the time."""

from __future__ import annotations

import asyncio
import contextlib
import os

import aiohttp

from runtime.child_process import kill_group, read_capped
from runtime.hooks.answer import HookFailure
from runtime.mcp.config import resolve_value
from runtime.policy.model import HookConfig
from runtime.redact import one_line, redact_text

MAX_ANSWER = 64 * 1024  # bytes of a hook's answer; more is a failure, never cut short
STDERR_KEPT = 2048  # bytes of a failed command's stderr kept for its reason
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


async def ask(config: HookConfig, payload: bytes) -> bytes:
    """The hook's answer to `payload` (the JSON of its input)."""
    if config.command is not None:
        return await ask_command(config.command, command_env(config.env), payload)
    assert config.url is not None
    return await ask_url(config.url, config.headers, payload)


def command_env(names: list[str]) -> dict[str, str]:
    """A command hook's environment: PATH and LANG, and the variables the admin named; none
    of clawgate's secrets (model keys, platform tokens, REDIS_URL) otherwise."""
    env = {"PATH": os.environ.get("PATH", DEFAULT_PATH), "LANG": "C.UTF-8"}
    env.update({name: os.environ[name] for name in names if name in os.environ})
    return env


async def ask_command(argv: list[str], env: dict[str, str], payload: bytes) -> bytes:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # its children are killed with it
        )
    except OSError as exc:
        raise HookFailure(f"could not start {argv[0]!r} ({exc.strerror or exc})") from None
    try:
        assert process.stdin and process.stdout and process.stderr
        (out, size), (err, _), _ = await asyncio.gather(
            read_capped(process.stdout, MAX_ANSWER),
            read_capped(process.stderr, STDERR_KEPT),
            _write(process.stdin, payload),
        )
        status = await process.wait()
    finally:
        if process.returncode is None:  # timed out or cancelled: no hook outlives its call
            kill_group(process.pid)
            await process.wait()
    if status != 0:
        said = one_line(redact_text(err.decode("utf-8", "replace").strip()), 200)
        raise HookFailure(f"exited with status {status}" + (f": {said}" if said else ""))
    if size > MAX_ANSWER:
        raise HookFailure(f"answered more than {MAX_ANSWER} bytes")
    return out


async def _write(stdin: asyncio.StreamWriter, payload: bytes) -> None:
    # A hook that exits without reading its input is its own business.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(payload)
        await stdin.drain()
        stdin.close()


async def ask_url(url: str, headers: dict[str, str], payload: bytes) -> bytes:
    try:
        sent = {name: resolve_value(value) for name, value in headers.items()}
    except KeyError as exc:
        raise HookFailure(f"its header needs {exc.args[0]}, which is not set") from None
    sent["Content-Type"] = "application/json"
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=payload, headers=sent, allow_redirects=False) as response,
        ):
            if response.status != 200:
                raise HookFailure(f"answered HTTP {response.status}")
            body = bytearray()
            while len(body) <= MAX_ANSWER and (chunk := await response.content.read(65536)):
                body += chunk
    except aiohttp.ClientError as exc:
        raise HookFailure(f"could not be reached ({type(exc).__name__})") from None
    if len(body) > MAX_ANSWER:
        raise HookFailure(f"answered more than {MAX_ANSWER} bytes")
    return bytes(body)
