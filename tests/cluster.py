"""A throwaway local Redis Cluster of three masters (no replicas) for the tests, the chaos
suite and `clawgate bench ingest`: `redis-server --cluster-enabled yes` three times, then
`redis-cli --cluster create`. A master can be killed and started again on its port, data
(AOF, `appendfsync always`) and cluster config, as a restarted node comes back.

By hand, to bench or try clawgate on it (stops on Ctrl-C):

    python -m tests.cluster            # prints REDIS_URL=redis://127.0.0.1:<port>/0
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

MASTERS = 3
START_TIMEOUT = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cluster_ports() -> list[int]:
    """Free ports whose cluster bus ports (+10000) are free too."""
    ports: list[int] = []
    while len(ports) < MASTERS:
        port = _free_port()
        if port + 10000 > 65535 or port in ports:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        ports.append(port)
    return ports


class LocalCluster:
    def __init__(self, *, aof: bool = True) -> None:
        """`aof`: keep an append-only file synced on every write, so a master killed and
        started again still holds what it acknowledged (off: faster, nothing survives)."""
        self.aof = aof
        self.ports = _cluster_ports()
        self.root = Path(tempfile.mkdtemp(prefix="clawgate-cluster-"))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """Any node names the cluster; the first is as good as the others."""
        return f"redis://127.0.0.1:{self.ports[0]}/0"

    def _binary(self, name: str) -> str:
        binary = shutil.which(name)
        if binary is None:
            raise RuntimeError(f"{name} is not installed")
        return binary

    def start_node(self, port: int) -> None:
        node_dir = self.root / str(port)
        node_dir.mkdir(exist_ok=True)
        args = [
            self._binary("redis-server"),
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--dir", str(node_dir),
            "--save", "",
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",
            # The other masters keep serving their slots while one is down (no replicas here).
            "--cluster-require-full-coverage", "no",
            "--cluster-node-timeout", "5000",
            "--appendonly", "yes" if self.aof else "no",
            "--appendfsync", "always",
        ]  # fmt: skip
        self.procs[port] = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._wait_port(port)

    def _wait_port(self, port: int) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {port} did not start")

    def _cli(self, *args: str, port: int | None = None) -> str:
        argv = [self._binary("redis-cli")]
        if port is not None:
            argv += ["-p", str(port)]
        done = subprocess.run(
            [*argv, *args], capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"redis-cli {' '.join(args)}: {done.stderr or done.stdout}")
        return done.stdout

    def start(self) -> LocalCluster:
        for port in self.ports:
            self.start_node(port)
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        self._cli("--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes")
        self.wait_ok()
        return self

    def wait_ok(self) -> None:
        """Until every node says the cluster is ok and knows every node's slots."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                if all(self._healthy(port) for port in self.ports):
                    return
            time.sleep(0.1)
        raise RuntimeError("the local cluster did not become ready")

    def _healthy(self, port: int) -> bool:
        info = self._cli("cluster", "info", port=port)
        if "cluster_state:ok" not in info or "cluster_slots_assigned:16384" not in info:
            return False
        nodes = self._cli("cluster", "nodes", port=port).splitlines()
        connected = [n for n in nodes if "master" in n and " connected" in n and "fail" not in n]
        return len(connected) == MASTERS

    def kill(self, index: int) -> None:
        """SIGKILL the `index`-th master."""
        proc = self.procs[self.ports[index]]
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    def restart(self, index: int, down: float = 0.5) -> None:
        """Kill the `index`-th master, wait `down` seconds, start it again on the same port,
        data and cluster config; returns once the cluster is ok again."""
        self.kill(index)
        time.sleep(down)
        self.start_node(self.ports[index])
        self.wait_ok()

    def flush(self) -> None:
        for port in self.ports:
            self._cli("flushall", port=port)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-aof", action="store_true", help="no append-only file (faster)")
    args = parser.parse_args()
    with LocalCluster(aof=not args.no_aof) as cluster:
        print(f"REDIS_URL={cluster.url}", flush=True)
        print("CLAWGATE_REDIS_CLUSTER=true", flush=True)
        stop = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # sigwait takes them, then we clean up
        signal.sigwait(stop)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
