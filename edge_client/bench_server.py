"""The server under ``airpatrol serve-bench``: ``airpatrol serve`` in a subprocess on 127.0.0.1 with a
fresh data folder (WebRTC streams only), and its resources read from ``/proc`` (RSS, threads, open
files, CPU seconds)."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pipelines.procfs import cpu_seconds, memory_mb


def children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            kids += [int(x) for x in (task / "children").read_text().split()]
    except OSError:
        pass
    return kids


# the detector service's process name (/proc/PID/comm), as edge_server.engines.detector_service sets it
SERVICE_COMM = "ap-detector"


def process_info(pid: int, pss: bool = True) -> dict[str, Any] | None:
    """One process's role (from its command line), CPU seconds, RSS and (``pss``) PSS in MB; None
    once gone."""
    cpu = cpu_seconds(pid)
    if math.isnan(cpu):
        return None
    mem = memory_mb(pid, pss)
    if mem is None:
        return None
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    text = b" ".join(cmd).decode(errors="replace")
    role = "fork server" if "forkserver" in text else Path(cmd[0].decode(errors="replace")).name or "?"
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/comm").read_text().strip() == SERVICE_COMM:
            role = "detector service"
    return {"role": role, "cpu_s": cpu, **mem}


def process_tree(root: int, pss: bool = True) -> dict[int, dict[str, Any]]:
    """``root`` (role ``server``) and every process under it (engine processes, their ``fork
    server``, nginx, Mosquitto): pid -> its role, CPU seconds so far, RSS and (``pss``) PSS in MB
    (Linux ``/proc``)."""
    out: dict[int, dict[str, Any]] = {}
    todo: list[tuple[int, str | None]] = [(root, None)]
    while todo:
        pid, parent = todo.pop()
        info = process_info(pid, pss)
        if info is None:
            continue
        if parent is None:
            info["role"] = "server"
        elif parent == "fork server" and info["role"] != "detector service":
            info["role"] = "engine"
        out[pid] = info
        todo += [(kid, info["role"]) for kid in children(pid)]
    return out


class ServerProcess:
    def __init__(
        self, args: argparse.Namespace, data_dir: Path, token: str, settings: dict[str, str] | None = None
    ) -> None:
        """``settings``: more of the server's environment (``AIRPATROL_*``), over the defaults here."""
        import socket

        port = args.port
        if not port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        env = dict(os.environ)
        env.update(
            {
                "AIRPATROL_API_TOKEN": token,
                "AIRPATROL_MAX_STREAMS": str(max(max(args.streams), 1)),
                "AIRPATROL_STREAM_IDLE_TIMEOUT_S": "15",
                "AIRPATROL_STATS_INTERVAL_S": "0.5",
                # WebRTC streams only: no nginx or Mosquitto beside the measured server
                "AIRPATROL_RTMP_PORT": "null",
                "AIRPATROL_MQTT_PORT": "null",
            }
        )
        if args.process_max_width:
            env["AIRPATROL_PROCESS_MAX_WIDTH"] = str(args.process_max_width)
        if args.detector_factory and args.detector_factory.lower() != "none":
            env["AIRPATROL_DETECTOR_FACTORY"] = args.detector_factory
        env.update(settings or {})
        cmd = [
            sys.executable,
            "-m",
            "airpatrol.cli",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(data_dir),
        ]
        cmd += ["--ice-host", "127.0.0.1"]
        if args.config:
            cmd += ["--config", str(args.config)]
        self.log_path = data_dir / "server.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        cpus = getattr(args, "server_cpus", None)
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # a slow box: the server and its children (engines, nginx) on these CPUs only
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,  # noqa: PLW1509
        )

    def wait_ready(self, timeout: float = 120.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if httpx.get(self.url + "/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"server not ready in {timeout:.0f} s; see {self.log_path}")

    def rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return float("nan")

    def threads_and_files(self) -> tuple[int, int]:
        """The server process's thread count and open file descriptors (-1 when unreadable)."""
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
            threads = int(status.split("Threads:")[1].split()[0])
            return threads, len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except (OSError, IndexError, ValueError):
            return -1, -1

    def cpu_s(self) -> float:
        """User + system CPU seconds of the server process so far."""
        return cpu_seconds(self.proc.pid)

    def processes(self, pss: bool = True) -> dict[int, dict[str, Any]]:
        """The server and every process under it: :func:`process_tree` (``pss``: with each one's PSS,
        costly: once a run, not every second)."""
        return process_tree(self.proc.pid, pss)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._log.close()
