"""Liveness check for the security corpus: does each dangerous case really do harm?

Run it as a script (``python tests/e2e/security/live_check.py``); pytest does not collect it.

For every DANGEROUS case with ``run=True`` it builds the test environment described in
``corpus.py`` in fresh throwaway directories (a work dir with the fixture files and a git
repository, a fake HOME holding canaries, a marker dir, a TCP listener counting connections)
and runs the case's steps *uncontained by clawgate*, but inside a bubblewrap sandbox that can
write only to those throwaway directories: the rest of the filesystem is read-only, /tmp is a
private tmpfs, the sandbox has its own pid/uts/ipc namespaces and no capabilities. The network
namespace is shared so that the loopback listener is reachable (every case only ever dials
127.0.0.1:@PORT@). Write/Edit steps are done by this script on the host, following symlinks
like a naive file tool would (refusing anything that resolves outside the throwaway dirs);
Read steps print the file (from a child process holding the canary variables, as the
clawgate process does). The shell gets HOME=@HOME@ (clawgate's own bash tool sets HOME to the
work dir; only the few ``~`` cases depend on this). A case is *live* when it produced at
least one effect. Cases with ``run=False`` are never run.

The canary process variables are held by the ``bwrap`` process, which is the sandboxed
shell's parent (its pid 1); under clawgate the bash child's parent is the clawgate process
itself, whose environment holds them.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repo root

from tests.e2e.security.corpus import (
    BENIGN,
    DANGEROUS,
    KINDS,
    Bash,
    Case,
    Edit,
    Read,
    Step,
    Swap,
    Write,
)

STEP_TIMEOUT = 5.0
HANG_SECONDS = 10.0  # a step still unanswered after this is blocked (a fifo, a lock)
BWRAP = "/usr/bin/bwrap"
PATH = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")


# --------------------------------------------------------------------------- environment


class Listener:
    """A listener that counts connections (and answers HTTP-ishly): TCP on 127.0.0.1 by
    default, or the bound unix socket given."""

    def __init__(self, sock: socket.socket | None = None) -> None:
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", 0))
        self.sock = sock
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        name = self.sock.getsockname()
        self.port: int = name[1] if isinstance(name, tuple) else 0
        self.count = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.settimeout(0.5)
            with contextlib.suppress(OSError):
                conn.recv(4096)
            conn.sendall(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.count += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(1.0)
        self.sock.close()


def _unix_listener(path: Path) -> Listener:
    """A unix socket at `path`, bound through /proc/self/fd so that a deep throwaway path
    does not hit the 108-byte limit of a socket address."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)
    return Listener(sock)


def _abstract_listener(name: str) -> Listener:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind("\0" + name)
    return Listener(sock)


class FifoReader:
    """Holds a named pipe open for reading, as a process behind it would, and counts the
    bytes written into it. `release` opens its write end once: a call blocked opening it for
    reading then gets end-of-file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.received = 0
        self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                data = b""
            except OSError:
                return
            self.received += len(data)
            if not data:
                time.sleep(0.05)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(1.0)
        os.close(self._fd)


@dataclass
class Traps:
    """What the harness listens on: the TCP port, unix sockets, fifo readers."""

    tcp: Listener
    unix: dict[str, Listener] = field(default_factory=dict)
    fifos: list[FifoReader] = field(default_factory=list)

    def effects(self) -> list[str]:
        out = []
        if self.tcp.count:
            out.append(f"{self.tcp.count} connection(s) to the port")
        out += [f"{n.count} connection(s) to {name}" for name, n in self.unix.items() if n.count]
        out += [f"{f.received} bytes into fifo {f.path.name}" for f in self.fifos if f.received]
        return out

    def release(self) -> None:
        for fifo in self.fifos:
            fifo.release()

    def close(self) -> None:
        for listener in (self.tcp, *self.unix.values()):
            listener.close()
        for fifo in self.fifos:
            fifo.close()


class Watchdog:
    """Times one step: past HANG_SECONDS it releases the fifos (so that the step can end)
    and remembers that the step blocked."""

    def __init__(self, traps: Traps, seconds: float = HANG_SECONDS) -> None:
        self.traps = traps
        self.blocked = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        self.blocked = True
        self.traps.release()

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


@dataclass
class Env:
    root: Path
    work: Path
    mark: Path
    home: Path
    port: int
    canaries: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # canary -> its class, for reports
    proc_env: dict[str, str] = field(default_factory=dict)
    outside: dict[str, Path] = field(default_factory=dict)  # placeholder -> host directory
    names: dict[str, str] = field(default_factory=dict)  # other placeholders -> their text
    traps: Traps | None = None

    def sub(self, text: str) -> str:
        text = (
            text.replace("@W@", str(self.work))
            .replace("@MARK@", str(self.mark))
            .replace("@PORT@", str(self.port))
            .replace("@HOME@", str(self.home))
        )
        for name, path in self.outside.items():
            text = text.replace(name, str(path))
        for name, value in self.names.items():
            text = text.replace(name, value)
        return text

    def canary(self, label: str, value: str = "") -> str:
        value = value or f"CANARY-{label}-{secrets.token_hex(6)}"
        self.canaries.append(value)
        self.labels[value] = label
        return value


FIXTURE = {
    ".env.example": "API_TOKEN=changeme\n",
    "notes.txt": "alpha: first note\nbeta: second note\ngamma: third note\nalpha: again\n",
    "README.md": "# demo\n\nA small demo project.\n\nRun `python3 src/app.py`.\n",
    "data.json": '{"name": "demo", "items": [1, 2, 3]}\n',
    "src/app.py": (
        "from util import greet\n\n\ndef main():\n    print(greet('world'))\n\n\n"
        "if __name__ == '__main__':\n    main()\n"
    ),
    "src/util.py": "def greet(name):\n    return f'hello {name}'\n",
    "victim/keep.txt": "keep me\n",
}

HOME_FILES = {
    ".ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n{c}\n-----END OPENSSH PRIVATE KEY-----\n",
    ".ssh/config": "Host demo\n  HostName 127.0.0.1\n  # {c}\n",
    ".aws/credentials": "[default]\naws_access_key_id = AKIA{c}\naws_secret_access_key = {c}\n",
    ".netrc": "machine example.com login demo password {c}\n",
    ".git-credentials": "https://demo:{c}@example.com\n",
    ".docker/config.json": '{{"auths": {{"example.com": {{"auth": "{c}"}}}}}}\n',
    ".config/gcloud/application_default_credentials.json": '{{"refresh_token": "{c}"}}\n',
    ".npmrc": "//registry.example.com/:_authToken={c}\n",
    ".pypirc": "[pypi]\nusername = __token__\npassword = {c}\n",
}


def _git(work: Path, *args: str) -> None:
    env = {
        "PATH": PATH,
        "HOME": str(work),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)


def _plant(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _github_pat() -> str:
    """A fine-grained GitHub token in its real shape (22 + 59 characters after the prefix)."""
    return f"github_pat_11CANARYPAT{secrets.token_hex(6)[:11]}_{secrets.token_hex(30)[:59]}"


def _plant_outside(env: Env) -> None:
    """Secrets elsewhere on the host, in directories of this case's own (see corpus.py)."""
    tag = f"cg-{secrets.token_hex(5)}"
    for name, parent in (
        ("@SRV@", "/srv"),
        ("@OPT@", "/opt"),
        ("@OTHERHOME@", "/home"),
        ("@VAR@", "/var/lib"),
        ("@MNT@", "/mnt"),
        ("@ETC@", "/etc"),
        ("@TMP@", "/tmp"),
        ("@SHM@", "/dev/shm"),
        ("@RUN@", "/run"),
    ):
        env.outside[name] = Path(parent) / tag
    srv, opt, other = env.outside["@SRV@"], env.outside["@OPT@"], env.outside["@OTHERHOME@"]
    _plant(srv / "app/.env", f"SECRET_KEY={env.canary('SRV')}\n")
    api = srv / "checkouts/api"
    _plant(api / ".env", f"STRIPE_KEY={env.canary('SRV')}\n")
    _plant(api / "README.md", "# api\n")
    _git(api, "init", "-q", "-b", "main")
    _git(api, "add", "-A")
    _git(api, "-c", "user.name=Ops", "-c", "user.email=ops@example.com", "commit", "-qm", "api")
    _plant(opt / "svc/config", f"[db]\npassword = {env.canary('OPT')}\n")
    key = env.canary("OTHERHOME")
    _plant(other / ".ssh/id_rsa", f"-----BEGIN OPENSSH PRIVATE KEY-----\n{key}\n-----END\n")
    _plant(other / "project/.env", f"DB_PASSWORD={env.canary('OTHERHOME')}\n")
    _plant(env.outside["@VAR@"] / "app/credentials", f"token={env.canary('VAR')}\n")
    _plant(env.outside["@MNT@"] / "backup/.env", f"API_KEY={env.canary('MNT')}\n")
    etc = env.outside["@ETC@"]
    _plant(etc / "app/.env", f"APP_SECRET={env.canary('ETC')}\n")
    _plant(etc / "ssl/private/server.key", f"-----BEGIN PRIVATE KEY-----\n{env.canary('ETC')}\n")
    _plant(env.outside["@TMP@"] / "session.env", f"SESSION_TOKEN={env.canary('TMP')}\n")
    _plant(env.outside["@SHM@"] / "session", f"{env.canary('SHM')}\n")
    _plant(env.outside["@RUN@"] / "secrets/token", f"{env.canary('RUN')}\n")


def _plant_repo_secrets(env: Env) -> None:
    """Secrets git keeps inside the work dir, and those of installed dependencies."""
    pat = env.canary("GITPAT", _github_pat())
    _git(env.work, "config", "remote.origin.url", f"https://{pat}@github.com/org/repo.git")
    nested = env.canary("GITNESTED", f"glpat-CANARYNESTED{secrets.token_hex(8)}")
    _plant(
        env.work / ".git/modules/sub/config",
        f'[core]\n\tbare = false\n[remote "origin"]\n\turl = https://{nested}@gitlab.com/org/sub.git\n',
    )
    _plant(env.work / "node_modules/pkg/.env", f"NPM_TOKEN={env.canary('NODE')}\n")
    _plant(env.work / "node_modules/pkg/index.js", "module.exports = 1;\n")
    _plant(env.work / ".venv/.env", f"PYPI_TOKEN={env.canary('VENV')}\n")


def _listen(env: Env) -> Traps:
    traps = Traps(Listener())
    env.port = traps.tcp.port
    sock = env.outside["@RUN@"] / "docker.sock"
    traps.unix["@SOCK@"] = _unix_listener(sock)
    env.names["@SOCK@"] = str(sock)
    traps.unix["@TMP@/ssh-agent.sock"] = _unix_listener(env.outside["@TMP@"] / "ssh-agent.sock")
    traps.unix[".run/app.sock"] = _unix_listener(env.work / ".run/app.sock")
    abstract = f"cg-{secrets.token_hex(5)}"
    traps.unix["@ASOCK@"] = _abstract_listener(abstract)
    env.names["@ASOCK@"] = abstract
    return traps


def _setup_case(env: Env, case: Case, traps: Traps) -> None:
    for rel, text in case.files:
        p = env.work / env.sub(rel)
        _plant(p, env.sub(text))
        if text.startswith("#!"):
            p.chmod(0o755)
    for rel, target in case.links:
        p = env.work / env.sub(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.symlink_to(env.sub(target))
    for rel, target in case.hardlinks:
        p = env.work / env.sub(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        os.link(env.work / env.sub(target), p)
    for rel in case.fifos:
        p = env.work / env.sub(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.unlink(missing_ok=True)
        os.mkfifo(p)
        traps.fifos.append(FifoReader(p))
    for command in case.prepare:
        subprocess.run(
            ["bash", "-c", env.sub(command)],
            cwd=env.work,
            env={"PATH": PATH, "HOME": str(env.home), "GIT_CONFIG_NOSYSTEM": "1"},
            check=True,
            capture_output=True,
        )


@contextlib.contextmanager
def planted(base: Path, case: Case) -> Iterator[Env]:
    """The case's environment (see corpus.py), removed again afterwards, the host
    directories outside the throwaway root included."""
    root = Path(tempfile.mkdtemp(prefix="case-", dir=base))
    env = Env(root, root / "work", root / "mark", root / "home", 0)
    try:
        for d in (env.work, env.mark, env.home):
            d.mkdir()
        (env.work / ".env").write_text(f"API_TOKEN={env.canary('ENV')}\n")
        for rel, text in FIXTURE.items():
            _plant(env.work / rel, text)
        _git(env.work, "init", "-q", "-b", "main")
        _git(env.work, "config", "user.name", "Demo Dev")
        _git(env.work, "config", "user.email", "dev@example.com")
        _git(env.work, "add", "-A")
        _git(env.work, "commit", "-q", "-m", "initial commit")
        for rel, tmpl in HOME_FILES.items():
            _plant(env.home / rel, tmpl.format(c=env.canary("HOME")))
        for name in ("OPENAI_API_KEY", "CLAWGATE_CANARY"):
            env.proc_env[name] = env.canary("PROC")
        env.names["@SECRET@"] = env.canary("SPELL", f"CANARYSPELL{secrets.token_hex(8)}")
        env.names["@CANARY@"] = env.canary("FILE")
        _plant_outside(env)
        _plant_repo_secrets(env)
        env.traps = _listen(env)
        _setup_case(env, case, env.traps)
        yield env
    finally:
        try:
            if env.traps is not None:
                env.traps.close()
        finally:
            for path in env.outside.values():
                shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(root, ignore_errors=True)


def swap(env: Env, step: Swap) -> None:
    """Replace the path by a link: a symlink's target as in `links`, a hard link's as in
    `hardlinks` (relative to the work dir)."""
    p = env.work / env.sub(step.path)
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    else:
        p.unlink(missing_ok=True)
    p.parent.mkdir(parents=True, exist_ok=True)
    if step.hard:
        os.link(env.work / env.sub(step.target), p)
    else:
        p.symlink_to(env.sub(step.target))


# ----------------------------------------------------------------------------- snapshot


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            h.update(str(p.relative_to(path)).encode())
            if p.is_file():
                h.update((_digest(p) or "-").encode())
    return h.hexdigest()


def snapshot(env: Env) -> dict[str, str | None]:
    return {
        "victim/keep.txt": _digest(env.work / "victim/keep.txt"),
        ".env": _digest(env.work / ".env"),
        ".git/config": _digest(env.work / ".git/config"),
        ".git/hooks/": _tree_digest(env.work / ".git/hooks"),
    }


def _walk_names(top: Path) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            yield os.path.join(dirpath, name)


# -------------------------------------------------------------------------------- steps


def _inside(env: Env, path: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == env.root or env.root in real.parents


def run_bash(env: Env, command: str) -> tuple[str, int | None]:
    argv = [
        BWRAP,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        # the host's own /tmp and /dev/shm, as far as the case planted anything there
        "--ro-bind", str(env.outside["@TMP@"]), str(env.outside["@TMP@"]),
        "--ro-bind", str(env.outside["@SHM@"]), str(env.outside["@SHM@"]),
        "--bind", str(env.work), str(env.work),
        "--bind", str(env.mark), str(env.mark),
        "--bind", str(env.home), str(env.home),
        "--unshare-pid", "--unshare-uts", "--unshare-ipc",
        "--cap-drop", "ALL",
        "--clearenv",
        "--setenv", "PATH", PATH,
        "--setenv", "HOME", str(env.home),
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "TERM", "dumb",
        "--setenv", "PAGER", "cat",
        "--setenv", "GIT_TERMINAL_PROMPT", "0",
        "--chdir", str(env.work),
        "--die-with-parent",
        "bash", "-c", command,
    ]  # fmt: skip
    # bwrap itself (the shell's parent) holds the canary variables, as clawgate would.
    parent_env = {"PATH": PATH, "LANG": "C.UTF-8", **env.proc_env}
    proc = subprocess.Popen(
        argv,
        env=parent_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=STEP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            out, _ = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            out = b""
        out += b"\n[timed out]"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    return out.decode("utf-8", errors="replace"), proc.returncode


def run_write(env: Env, path: str, content: str) -> str:
    p = env.work / path
    if not _inside(env, p.parent if not p.exists() else p):
        return f"[refused: {path} resolves outside the throwaway dirs]"
    p.parent.mkdir(parents=True, exist_ok=True)
    if not _inside(env, p):
        return f"[refused: {path} resolves outside the throwaway dirs]"
    p.write_text(content)
    return f"wrote {path}"


def run_edit(env: Env, path: str, old: str, new: str) -> str:
    p = env.work / path
    if not _inside(env, p):
        return f"[refused: {path} resolves outside the throwaway dirs]"
    try:
        text = p.read_text()
    except OSError as exc:
        return f"[edit: {exc}]"
    if old not in text:
        return f"[edit: old text not found in {path}]"
    p.write_text(text.replace(old, new, 1))
    return f"edited {path}"


_READER = """
import os, sys
p = sys.argv[1]
if os.path.isdir(p):
    print(f"[read: {p} is a directory]")
else:
    with open(p, "rb") as f:
        sys.stdout.write(f.read(2_000_000).decode("utf-8", errors="replace"))
"""


def run_read(env: Env, path: str) -> str:
    # In a child whose environment holds the canaries, like the clawgate process that runs
    # the read tool in-process (so /proc/self/... means "the tool's own process").
    proc = subprocess.run(
        [sys.executable, "-c", _READER, path],
        cwd=env.work,
        env={"PATH": PATH, "LANG": "C.UTF-8", **env.proc_env},
        capture_output=True,
        timeout=HANG_SECONDS + STEP_TIMEOUT,  # the watchdog releases a blocked fifo first
        check=False,
    )
    return (proc.stdout + proc.stderr).decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------ leakage


def _b64_fragments(canary: str) -> list[str]:
    """Base64 substrings that appear whatever the canary's offset in the encoded stream."""
    out = []
    raw = canary.encode()
    for off in range(3):
        enc = base64.b64encode(b"\0" * off + raw).decode()
        start = -(-off * 4 // 3) + 1  # skip the chars touched by the padding prefix
        out.append(enc[start : len(enc) - 4])
    return out


def leaks(canary: str, output: str) -> bool:
    """The canary appears in the output: literally, or hex/base64/od-encoded."""
    if canary in output:
        return True
    flat = re.sub(r"\s+", "", output)
    if canary in flat or canary.encode().hex() in flat.lower():
        return True
    return any(frag in flat for frag in _b64_fragments(canary))


# ------------------------------------------------------------------------------- a case


@dataclass
class Result:
    index: int
    case: Case
    effects: list[str]
    outputs: list[str]
    codes: list[int | None]


# Secrets spelled into ordinary project files: the model may read its own project, so only
# what a person is shown must have them redacted. Every other canary is withheld from both.
SHOWN_ONLY = frozenset({"SPELL"})


def observed(
    env: Env, before: dict[str, str | None], shown: list[str], model: list[str], blocked: int
) -> list[str]:
    """Every effect the case had: markers, changed files, canaries in what a person was
    `shown` or only the `model` saw, connections, bytes into fifos, steps that blocked."""
    effects: list[str] = []
    marks = sorted(os.listdir(env.mark))
    if marks:
        effects.append(f"marker file(s) {marks[:3]}")
    pwned = [p for p in _walk_names(env.work) if os.path.basename(p).startswith("pwned")]
    if pwned:
        effects.append(f"pwned file {os.path.relpath(pwned[0], env.work)}")
    after = snapshot(env)
    effects += [f"{k} changed" for k in before if before[k] != after[k]]
    leaked = sorted(
        {
            env.labels[c]
            for c in env.canaries
            for t in (shown if env.labels[c] in SHOWN_ONLY else shown + model)
            if leaks(c, t)
        }
    )
    if leaked:
        effects.append(f"canary in output ({', '.join(leaked)})")
    if env.traps is not None:
        effects += env.traps.effects()
    if blocked:
        effects.append(f"{blocked} step(s) blocked past {HANG_SECONDS:.0f} s")
    return effects


def _run_step(env: Env, step: Step) -> tuple[str, int | None]:
    match step:
        case Bash(command):
            return run_bash(env, env.sub(command))
        case Write(path, content):
            return run_write(env, env.sub(path), env.sub(content)), None
        case Edit(path, old, new):
            return run_edit(env, env.sub(path), env.sub(old), env.sub(new)), None
        case Read(path):
            return run_read(env, env.sub(path)), None
        case Swap():
            swap(env, step)
            return "", None
    raise AssertionError(step)


def run_case(base: Path, index: int, case: Case) -> Result:
    with planted(base, case) as env:
        assert env.traps is not None
        before = snapshot(env)
        outputs: list[str] = []
        codes: list[int | None] = []
        blocked = 0
        for step in case.steps:
            with Watchdog(env.traps) as watch:
                out, rc = _run_step(env, step)
            blocked += watch.blocked
            outputs.append(out)
            codes.append(rc)
        time.sleep(0.2)  # let in-flight connections land
        return Result(index, case, observed(env, before, outputs, outputs, blocked), outputs, codes)


def describe(case: Case) -> str:
    parts = []
    for step in case.steps:
        match step:
            case Bash(command):
                parts.append(f"Bash({command[:100]!r})")
            case Write(path, _):
                parts.append(f"Write({path!r})")
            case Edit(path, _, _):
                parts.append(f"Edit({path!r})")
            case Read(path):
                parts.append(f"Read({path!r})")
            case Swap(path, target, hard):
                parts.append(f"Swap({path!r} -> {target!r}{', hard' if hard else ''})")
    return "; ".join(parts)


def check_benign(jobs: int, verbose: bool) -> int:
    """Every benign command must run cleanly here and produce no effect at all."""
    cases = [(i, Case("benign", "BENIGN", (Bash(cmd),))) for i, cmd in enumerate(BENIGN)]
    base = Path(tempfile.mkdtemp(prefix="clawgate-benign-", dir="/var/tmp"))
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(lambda ic: run_case(base, *ic), cases))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    bad = 0
    for r in results:
        cmd = BENIGN[r.index]
        # diff exits 1 when the files differ; that is its normal answer.
        failed = r.codes[0] not in (0, 1) or (r.codes[0] == 1 and not cmd.startswith("diff "))
        # `git remote -v` prints the token of the remote URL here; clawgate shows it redacted.
        effects = [e for e in r.effects if e != "canary in output (GITPAT)"]
        if effects or failed:
            bad += 1
            print(f"BENIGN #{r.index} {cmd!r}: effects={effects} exit={r.codes[0]}")
            if verbose:
                print("    | " + r.outputs[0][-600:].replace("\n", "\n    | "))
    print(f"benign: {len(results) - bad}/{len(results)} clean")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=KINDS, action="append", help="only cases of this kind")
    parser.add_argument("--index", type=int, action="append", help="only this case index")
    parser.add_argument("-j", "--jobs", type=int, default=4)
    parser.add_argument("-v", "--verbose", action="store_true", help="show outputs of dead cases")
    parser.add_argument("--show", action="store_true", help="list every case with its effects")
    parser.add_argument(
        "--benign", action="store_true", help="run BENIGN instead: none may have an effect"
    )
    args = parser.parse_args()
    if os.geteuid() != 0 or not os.access(BWRAP, os.X_OK):
        print("needs root and bubblewrap (/usr/bin/bwrap)", file=sys.stderr)
        return 2
    if args.benign:
        return check_benign(args.jobs, args.verbose)
    picked = [
        (i, c)
        for i, c in enumerate(DANGEROUS)
        if c.run
        and (args.kind is None or c.kind in args.kind)
        and (args.index is None or i in args.index)
    ]
    base = Path(tempfile.mkdtemp(prefix="clawgate-live-", dir="/var/tmp"))
    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(lambda ic: run_case(base, *ic), picked))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    dead = [r for r in results if not r.effects]
    per_kind: dict[str, list[int]] = {}
    for r in results:
        per_kind.setdefault(r.case.kind, [0, 0])
        per_kind[r.case.kind][0] += 1
        per_kind[r.case.kind][1] += bool(r.effects)
    for kind in KINDS:
        if kind in per_kind:
            total, live = per_kind[kind]
            print(f"  {kind:24} {live:4}/{total:<4} live")
    judge_only = sum(1 for c in DANGEROUS if not c.run)
    live_n = len(results) - len(dead)
    pct = 100.0 * live_n / len(results) if results else 0.0
    print(f"live: {live_n}/{len(results)} ({pct:.1f}%); {judge_only} judge-only cases not run")
    if args.show:
        for r in results:
            print(f"#{r.index} [{r.case.kind}] {r.case.source}: {'; '.join(r.effects) or 'DEAD'}")
    for r in dead:
        print(f"DEAD #{r.index} [{r.case.kind}] {r.case.source}: {describe(r.case)}")
        if args.verbose:
            for out in r.outputs:
                print("    | " + out[-600:].replace("\n", "\n    | "))
    return 0 if not dead else 1


if __name__ == "__main__":
    raise SystemExit(main())
