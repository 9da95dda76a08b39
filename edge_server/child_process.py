"""Programs the server runs beside itself (nginx for RTMP, Mosquitto for MQTT): started with the
server, checked until they listen, stopped with it."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)


class ChildUnavailable(RuntimeError):
    """The program could not be started or did not come up; the message says why."""


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000  # free_port picks from here up to the ephemeral range
_handed_out: set[int] = set()
_handed_lock = threading.Lock()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux; 32768-60999 elsewhere)."""
    try:
        lo, hi = (int(x) for x in EPHEMERAL_RANGE.read_text().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` now, for a listener that binds it a moment later (a child
    process, a server thread). Chosen below the kernel's ephemeral range, and never the same twice
    in a process: a port from ``bind(0)`` lies in that range, from which every outgoing connection
    draws its local port, so before the listener binds it a connection may take it ("address
    already in use": a test server failed to start so, once in about twenty CI runs). Falls back
    to ``bind(0)`` where the range leaves no room below it."""
    lo, _ = ephemeral_range()
    rng = random.Random()
    with _handed_lock:
        if lo - LOWEST_PORT >= 1000:
            for _ in range(200):
                port = rng.randrange(LOWEST_PORT, lo)
                if port not in _handed_out and _bindable(host, port):
                    _handed_out.add(port)
                    return port
        with socket.socket() as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        _handed_out.add(port)
        return port


def port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def group_alive(pgid: int) -> bool:
    """Whether any process of process group ``pgid`` runs (zombies do not)."""
    for stat_path in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_path.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def loopback(host: str) -> str:
    """Where to reach a service listening on ``host`` from this machine."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


class ChildProcess:
    """``argv`` run in a session of its own (a Ctrl-C meant for the server does not kill it first),
    its output in ``log_path``; up once every ``(host, port)`` of :meth:`start` accepts connections."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_path: Path,
        stop_signal: int = signal.SIGTERM,
        pid_file: Path | None = None,
    ) -> None:
        """``pid_file``: where the program writes its pid; one left by a server that was killed (its
        children outlive it, holding their ports) names a process that is stopped before starting."""
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.stop_signal = stop_signal
        self.pid_file = pid_file
        self._proc: subprocess.Popen[bytes] | None = None

    def _stop_leftover(self) -> None:
        """The process of ``pid_file`` when it runs this very command (its arguments: nginx rewrites
        its process title around them): a previous run's."""
        if self.pid_file is None:
            return
        try:
            pid = int(self.pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            return
        if not alive(pid) or not all(arg in cmdline for arg in self.argv[1:]):
            return
        log.warning("stopping %s (pid %d) left running by a previous server", self.name, pid)
        try:
            group = os.getpgid(pid)
        except ProcessLookupError:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
        # every process of the group, not only the one named: nginx's workers hold the listening
        # socket too, and a worker still exiting made the next start find its port "in use"
        deadline = time.monotonic() + 5.0
        while group_alive(group) and time.monotonic() < deadline:
            time.sleep(0.05)

    def start(self, listening: list[tuple[str, int]], timeout_s: float = 15.0) -> None:
        self._stop_leftover()
        # a port someone else holds (another server's broker, a system nginx) would pass the check
        # below while this program fails to bind: the server would talk to a stranger
        taken = [port for host, port in listening if port_open(loopback(host), port)]
        if taken:
            raise ChildUnavailable(
                f"{self.name}: port {', '.join(map(str, taken))} is in use by another program "
                f"(`ss -ltnp 'sport = :{taken[0]}'` names it)"
            )
        with contextlib.suppress(OSError):
            self.log_path.unlink()
        try:
            with open(self.log_path, "ab") as out:
                self._proc = subprocess.Popen(
                    self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
                )
        except OSError as exc:
            raise ChildUnavailable(f"cannot start {self.name} ({self.argv[0]}): {exc}") from exc
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._proc.poll() is None:
            if all(port_open(loopback(host), port) for host, port in listening):
                log.info("%s started (pid %d)", self.name, self._proc.pid)
                return
            time.sleep(0.05)
        detail = self.log_tail() or "no output"
        self.stop()
        raise ChildUnavailable(f"{self.name} did not start listening on {listening}: {detail}")

    def log_tail(self, lines: int = 5) -> str:
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(errors="replace").strip().splitlines()
            return " | ".join(text[-lines:])
        return ""

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop it gracefully (``stop_signal``), then whatever is left of its process group (nginx's
        workers outlive a master that was killed)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(self.stop_signal)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: the group is its own


class ChildService:
    """A service the server runs as a child process (nginx, Mosquitto): its ``_proc`` once started."""

    _proc: ChildProcess | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.running

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._proc is not None:
            self._proc.stop(timeout_s)


__all__ = [
    "ChildProcess",
    "ChildService",
    "ChildUnavailable",
    "alive",
    "ephemeral_range",
    "free_port",
    "loopback",
    "port_open",
]
