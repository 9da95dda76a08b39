"""RTMP ingest for the stock DJI apps (Pilot 2, Fly): nginx with the RTMP module, run by the server.

Why nginx-rtmp: DJI Pilot 2 and DJI Fly push H.264 over RTMP to any URL, and the RTMP server
must accept or refuse each publisher by its stream key, take several at once, and tell when one
leaves. nginx's RTMP module (Debian: ``nginx-light`` + ``libnginx-mod-rtmp``) does all of it and
has been the reference RTMP server for a decade; FFmpeg's own RTMP listener (``-listen 1``, which
PyAV could drive) takes one connection per port and does not check the stream key, and no
maintained pure-Python RTMP server exists.

How it fits: ``airpatrol serve`` writes an nginx config into ``<data_dir>/rtmp`` and runs nginx
as a child process (:class:`RtmpServer`). A publisher's ``rtmp://host:1935/live/<key>`` reaches
nginx, which asks the edge server (``on_publish``, an HTTP GET to a loopback route whose path
holds a secret made at startup) whether the key is valid; a wrong key is refused there. For an
accepted key, the server plays the stream back from nginx on 127.0.0.1 with PyAV
(:mod:`edge_server.pull`) into the same per-stream worker as WebRTC. ``on_publish_done`` ends the
session when the publisher leaves; when the server ends a session itself it drops the
publisher through nginx's control endpoint (HTTP on 127.0.0.1). Nobody but the server may play a
stream (``allow play 127.0.0.1``).
"""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from edge_server.child_process import ChildProcess, ChildService, ChildUnavailable, free_port, loopback
from pipelines.errors import AirPatrolError

log = logging.getLogger(__name__)

RTMP_APP = "live"
NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/nginx/sbin/nginx", "/usr/local/sbin/nginx")
MODULE_CANDIDATES = (
    "/usr/lib/nginx/modules/ngx_rtmp_module.so",
    "/usr/lib64/nginx/modules/ngx_rtmp_module.so",
    "/usr/local/nginx/modules/ngx_rtmp_module.so",
)
INSTALL_HINT = "install it with: apt-get install nginx-light libnginx-mod-rtmp (Debian/Ubuntu)"


class RtmpUnavailable(AirPatrolError):
    """nginx with the RTMP module cannot be found or started; the message says what to install."""


@dataclass(frozen=True)
class NginxBinary:
    path: str
    module: str | None  # the dynamic RTMP module to load; None when nginx has it built in


def find_nginx(nginx: str | None = None) -> NginxBinary:
    """nginx (``nginx`` path, else PATH and the usual places) and its RTMP module."""
    path = nginx or shutil.which("nginx") or next((p for p in NGINX_CANDIDATES if Path(p).exists()), None)
    if path is None or not Path(path).exists():
        raise RtmpUnavailable(
            f"RTMP ingest needs nginx with the RTMP module, and nginx was not found; {INSTALL_HINT}"
        )
    try:
        version = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10).stderr
    except (OSError, subprocess.SubprocessError) as exc:
        raise RtmpUnavailable(f"cannot run {path} -V: {exc}") from exc
    if "nginx-rtmp-module" in version:  # compiled in
        return NginxBinary(path, None)
    module = next((m for m in MODULE_CANDIDATES if Path(m).exists()), None)
    if module is None:
        raise RtmpUnavailable(f"nginx at {path} has no RTMP module; {INSTALL_HINT}")
    return NginxBinary(path, module)


def render_config(
    *,
    workdir: Path,
    module: str | None,
    listen: str,
    control_port: int,
    publish_url: str,
    publish_done_url: str,
    idle_timeout_s: float,
) -> str:
    """The nginx config: one RTMP application ``live`` whose publishers the edge server admits
    (``on_publish``), played back only from 127.0.0.1, and a control endpoint on 127.0.0.1."""
    load = f"load_module {module};\n" if module else ""
    tmp = workdir / "tmp"
    idle = max(1, round(idle_timeout_s))
    return f"""# written by airpatrol serve at every start; edits are lost
daemon off;
worker_processes 1;
pid {workdir / "nginx.pid"};
error_log {workdir / "error.log"} warn;
{load}events {{ worker_connections 512; }}
rtmp {{
    server {{
        listen {listen};
        chunk_size 4096;
        # the RTMP module's own access log defaults to /var/log/nginx/access.log, which an
        # unprivileged server (the container's user) cannot open: nginx would not start
        access_log off;
        notify_method get;
        # on_publish waits while the server sets the stream up (its player joins; without a spare
        # pipeline, one is built: seconds on small CPUs)
        netcall_timeout 20s;
        application {RTMP_APP} {{
            live on;
            record off;
            allow publish all;
            allow play 127.0.0.1;
            deny play all;
            drop_idle_publisher {idle}s;
            on_publish {publish_url};
            on_publish_done {publish_done_url};
        }}
    }}
}}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{control_port};
        location /control {{ rtmp_control all; }}
        location /stat {{ rtmp_stat all; }}
    }}
}}
"""


class RtmpServer(ChildService):
    """nginx with the RTMP module as a child process of the edge server (see the module doc)."""

    def __init__(
        self,
        workdir: Path,
        *,
        host: str,
        port: int,
        callback_base: str,
        nginx: str | None = None,
        idle_timeout_s: float = 10.0,
    ) -> None:
        """``callback_base``: the edge server's loopback URL up to the secret part of the callback
        path (``http://127.0.0.1:8080/internal/rtmp/<secret>``)."""
        self.workdir = workdir
        self.host = host
        self.port = port
        self.callback_base = callback_base.rstrip("/")
        self.binary = find_nginx(nginx)
        self.idle_timeout_s = idle_timeout_s
        self.control_port = 0
        self._proc: ChildProcess | None = None

    @property
    def play_base(self) -> str:
        """Where the server itself plays streams from (loopback)."""
        return f"rtmp://{loopback(self.host)}:{self.port}/{RTMP_APP}"

    def start(self, timeout_s: float = 15.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "tmp").mkdir(exist_ok=True)
        self.control_port = free_port()
        config = render_config(
            workdir=self.workdir.resolve(),
            module=self.binary.module,
            listen=f"{self.host}:{self.port}" if self.host not in ("", "0.0.0.0") else str(self.port),
            control_port=self.control_port,
            publish_url=f"{self.callback_base}/publish",
            publish_done_url=f"{self.callback_base}/publish_done",
            idle_timeout_s=self.idle_timeout_s,
        )
        path = self.workdir / "nginx.conf"
        path.write_text(config)
        path.chmod(0o600)  # it holds the callback secret
        errors = (self.workdir / "error.log").resolve()
        argv = [
            self.binary.path,
            "-c",
            str(path.resolve()),
            "-p",
            str(self.workdir.resolve()),
            "-e",
            str(errors),
        ]
        # SIGQUIT: nginx's graceful stop (connections closed, then exit)
        self._proc = ChildProcess(
            "nginx (RTMP)", argv, errors, stop_signal=signal.SIGQUIT, pid_file=self.workdir / "nginx.pid"
        )
        try:
            self._proc.start([(self.host, self.port), ("127.0.0.1", self.control_port)], timeout_s)
        except ChildUnavailable as exc:
            raise RtmpUnavailable(str(exc)) from exc
        log.info("RTMP ingest on rtmp://%s:%d/%s/<stream key>", self.host, self.port, RTMP_APP)

    def error_tail(self) -> str:
        return self._proc.log_tail(2) if self._proc is not None else ""

    def drop(self, key: str) -> int:
        """Disconnect the publisher and the players of stream ``key`` (nginx's control endpoint);
        how many connections were dropped."""
        if not self.running:
            return 0
        query = urllib.parse.urlencode({"app": RTMP_APP, "name": key})
        dropped = 0
        for who in ("publisher", "subscriber"):
            url = f"http://127.0.0.1:{self.control_port}/control/drop/{who}?{query}"
            try:
                with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - our own loopback endpoint
                    dropped += int(resp.read().strip() or b"0")
            except (OSError, ValueError):
                log.debug("nginx drop of a %s failed", who, exc_info=True)
        return dropped

    def players(self, key: str) -> int:
        """How many players stream ``key`` has now (nginx's statistics; 0 when unknown)."""
        if not self.running:
            return 0
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.control_port}/stat", timeout=5) as resp:  # noqa: S310
                root = ElementTree.fromstring(resp.read())
        except (OSError, ElementTree.ParseError):
            log.debug("nginx statistics not read", exc_info=True)
            return 0
        for stream in root.iter("stream"):
            if stream.findtext("name") == key:
                return sum(1 for c in stream.iter("client") if c.find("publishing") is None)
        return 0

    def wait_player(self, key: str, timeout_s: float) -> bool:
        """Wait until the server's own player of ``key`` is connected at nginx (then a publisher
        admitted now loses no frame: a player that joins later starts at the next keyframe)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.players(key) > 0:
                return True
            time.sleep(0.02)
        return False


__all__ = ["RTMP_APP", "RtmpServer", "RtmpUnavailable", "find_nginx", "render_config"]
