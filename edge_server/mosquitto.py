"""The MQTT broker DJI Pilot 2 connects to (DJI Cloud API): Mosquitto, run by the server.

Why Mosquitto: Eclipse's broker is the reference MQTT 3.1.1/5 implementation, small, packaged by
Debian (``apt-get install mosquitto``; the Docker image has it) and runs fine as a child process
with a config of our own. amqtt (pure Python) would run inside the server's process, where every
OSD message would take the GIL from the stream workers. A site that runs its own broker (EMQX,
the one of an existing DJI Cloud API deployment) sets ``mqtt_url`` instead and none is started.

The broker refuses anonymous clients: pilots and the server log in with ``mqtt_username`` and a
password (``mqtt_password``, or one generated once into ``<data_dir>/mqtt_password``, mode 0600).
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
from pathlib import Path

from edge_server.child_process import ChildProcess, ChildService, ChildUnavailable
from pipelines.errors import AirPatrolError

MOSQUITTO_CANDIDATES = ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto", "/usr/bin/mosquitto")
INSTALL_HINT = (
    "install it with: apt-get install mosquitto (Debian/Ubuntu), or set mqtt_url to a broker of yours"
)


class BrokerUnavailable(AirPatrolError):
    """Mosquitto cannot be found or started; the message says what to do."""


def find_program(name: str, given: str | None, candidates: tuple[str, ...]) -> str | None:
    path = given or shutil.which(name) or next((p for p in candidates if Path(p).exists()), None)
    return path if path and Path(path).exists() else None


def render_config(*, host: str, port: int, password_file: Path, user: str, pid_file: Path) -> str:
    listen = f"listener {port}" + ("" if host in ("", "0.0.0.0") else f" {host}")
    return f"""# written by airpatrol serve at every start; edits are lost
{listen}
allow_anonymous false
password_file {password_file}
persistence false
pid_file {pid_file}
log_dest stderr
log_type error
log_type warning
log_type notice
# the user the broker runs as (as root Mosquitto would switch to 'mosquitto', which cannot read
# the password file)
user {user}
"""


class MosquittoBroker(ChildService):
    def __init__(
        self,
        workdir: Path,
        *,
        host: str,
        port: int,
        username: str,
        password: str,
        mosquitto: str | None = None,
    ) -> None:
        binary = find_program("mosquitto", mosquitto, MOSQUITTO_CANDIDATES)
        if binary is None:
            raise BrokerUnavailable(
                f"DJI Cloud API telemetry needs an MQTT broker, and mosquitto was not found; {INSTALL_HINT}"
            )
        self.binary = binary
        self.workdir = workdir
        self.host, self.port = host, port
        self.username, self.password = username, password
        self._proc: ChildProcess | None = None

    def start(self, timeout_s: float = 15.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        passwd = self.workdir / "passwd"
        passwd.unlink(missing_ok=True)
        passwd.touch(mode=0o600)
        tool = find_program("mosquitto_passwd", None, ("/usr/bin/mosquitto_passwd",))
        if tool is None:
            raise BrokerUnavailable(f"mosquitto_passwd not found beside {self.binary}; {INSTALL_HINT}")
        try:  # the password goes in through stdin's prompt twice, never on a command line
            subprocess.run(
                [tool, str(passwd), self.username],
                input=f"{self.password}\n{self.password}\n",
                text=True,
                capture_output=True,
                check=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise BrokerUnavailable(f"cannot write the broker's password file: {exc}") from exc
        config = self.workdir / "mosquitto.conf"
        config.write_text(
            render_config(
                host=self.host,
                port=self.port,
                password_file=passwd.resolve(),
                user=getpass.getuser(),
                pid_file=(self.workdir / "mosquitto.pid").resolve(),
            )
        )
        self._proc = ChildProcess(
            "mosquitto (MQTT)",
            [self.binary, "-c", str(config.resolve())],
            self.workdir / "mosquitto.log",
            pid_file=self.workdir / "mosquitto.pid",
        )
        try:
            self._proc.start([(self.host, self.port)], timeout_s)
        except ChildUnavailable as exc:
            raise BrokerUnavailable(str(exc)) from exc


def resolve_password(data_dir: Path, configured: str | None) -> str:
    """The configured MQTT password, else the one kept in ``<data_dir>/mqtt_password`` (made once)."""
    if configured:
        return configured
    import secrets

    path = data_dir / "mqtt_password"
    if path.exists() and path.read_text().strip():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(18)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value + "\n")
    return value


__all__ = ["BrokerUnavailable", "MosquittoBroker", "render_config", "resolve_password"]
