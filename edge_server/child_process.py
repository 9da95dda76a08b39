"""Programs the server runs beside itself (nginx for RTMP, Mosquitto for MQTT): started with the
server, checked until they listen, stopped with it."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import subprocess
import time
from pathlib import Path

log = logging.getLogger(__name__)


class ChildUnavailable(RuntimeError):
    """The program could not be started or did not come up; the message says why."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


def loopback(host: str) -> str:
    """Where to reach a service listening on ``host`` from this machine."""
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


class ChildProcess:
    """``argv`` run in a session of its own (a Ctrl-C meant for the server does not kill it first),
    its output in ``log_path``; up once every ``(host, port)`` of :meth:`start` accepts connections."""

    def __init__(self, name: str, argv: list[str], log_path: Path, stop_signal: int = signal.SIGTERM) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.stop_signal = stop_signal
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, listening: list[tuple[str, int]], timeout_s: float = 15.0) -> None:
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

    def stop(self, timeout_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(self.stop_signal)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


__all__ = ["ChildProcess", "ChildUnavailable", "free_port", "loopback", "port_open"]
