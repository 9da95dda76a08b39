"""Server settings: environment (``AIRPATROL_*``) over a YAML settings file over defaults.

Pydantic lives here because settings are an edge of the service. Everything below the API
layer receives a plain :class:`ServerSettings` object.
"""

from __future__ import annotations

import contextvars
import logging
import os
import re
import secrets
import socket
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from pipelines.config import read_yaml_mapping
from pipelines.errors import AirPatrolError

log = logging.getLogger(__name__)

_settings_file_data: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "_settings_file_data", default=None
)


# a server id, a broker user name: one token of letters, digits, "_", "." and "-"
PLAIN_ID = r"^[A-Za-z0-9_.-]+$"
STREAM_MEMORY_MB = 400.0  # RSS a 1080p stream adds with the shipped models (docs/RESULTS.md)


class SettingsError(AirPatrolError, ValueError):
    """Server settings that cannot be used; the message says what to fix."""


class WebhookConfig(BaseModel):
    """One outgoing webhook target (edge_server.alerts.webhooks): a JSON POST per event, signed with
    HMAC-SHA256 under ``secret``; ``events``: which; ``enforceable_only``: new violations only when
    enforceable (what a dispatch system acts on)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=PLAIN_ID)
    url: str = Field(pattern=r"^https?://[^\s]+$", max_length=2000)
    secret: SecretStr = Field(min_length=16)
    events: list[Literal["violation", "violation.updated", "violation.evidence_ready"]] = ["violation"]
    enforceable_only: bool = True


class ServerSettings(BaseSettings):
    """Everything ``airpatrol serve`` can be told. Env names are ``AIRPATROL_<FIELD>``."""

    # AIRPATROL_RTMP_PORT=null (any optional setting): None, e.g. RTMP ingest off
    model_config = SettingsConfigDict(
        env_prefix="AIRPATROL_", extra="forbid", validate_default=True, env_parse_none_str="null"
    )

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    # Bearer token for every route but /healthz. None -> a random token is generated once and
    # kept in <data_dir>/api_token (mode 0600), and its location is logged.
    api_token: SecretStr | None = None

    data_dir: Path = Path("airpatrol-data")
    # This server's name in a fleet sharing one database, stamped on its sessions and violations;
    # None -> "<host name>-<4 hex>", made once and kept in <data_dir>/server_id
    server_id: str | None = Field(None, min_length=1, max_length=64, pattern=PLAIN_ID)
    # SQLAlchemy URL; default sqlite:///<data_dir>/airpatrol.db (WAL). PostgreSQL:
    # postgresql+psycopg2://user:password@host:5432/db
    database_url: str | None = None
    media_dir: Path | None = None  # snapshots and clips; default <data_dir>/media
    pipeline_config: Path | None = None  # site YAML (PipelineConfig); None -> defaults
    # Optional "module:callable" returning a detector for every stream (see docs/api.md);
    # None -> build_pipeline loads the detector from the pipeline config.
    detector_factory: str | None = None

    max_streams: int = Field(4, ge=1)
    # Memory admission (issue 42): a new stream is refused (503 at_capacity) when the box's available
    # memory less stream_memory_mb (what one stream takes, measured: docs/RESULTS.md) would fall
    # below min_free_memory_mb; null turns the check off.
    stream_memory_mb: float | None = Field(STREAM_MEMORY_MB, gt=0)
    min_free_memory_mb: float | None = Field(512.0, ge=0)
    # operators watching one stream's annotated video at once (the console's Live page): each is
    # one more H.264/VP8 encode of the return video on this CPU
    max_viewers: int = Field(2, ge=0)
    ice_servers: list[str] = []  # e.g. ["stun:stun.l.google.com:19302"]; none needed on a LAN
    stream_idle_timeout_s: float = Field(10.0, gt=0)  # no video for this long -> the stream ends
    telemetry_max_age_s: float = Field(2.0, gt=0)  # hold the last sample at most this long
    # Telemetry is looked up at (frame's sender time - this): set it to how much later the video
    # reaches the sending app than the telemetry of the same instant (docs/telemetry-datachannel.md).
    telemetry_time_offset_s: float = Field(0.0, ge=-5, le=5)
    max_telemetry_message_bytes: int = Field(16384, ge=256)
    # Telemetry whose timestamp is further than this from the server's clock at arrival is
    # rejected (a timestamp in milliseconds, a clock that is not the wall clock): one such sample
    # must not throw off the clock mapping. 0 accepts any clock (senders whose timestamps are not
    # Unix time, or a server whose clock is not set): telemetry is then aligned by arrival times.
    telemetry_max_clock_skew_s: float = Field(86400.0, ge=0)

    # Downscale frames wider than this before the pipeline (whole frame, so the ground geometry
    # stays right); None = full resolution. 960-1280 roughly halves the CPU per 1080p frame.
    process_max_width: int | None = Field(None, ge=160)

    # Live streams detect on keyframes and carry boxes by optical flow in between
    # (PipelineConfig.keyframes, its parameters from the site YAML). A site YAML that sets
    # keyframes.enabled itself wins; False here runs the detector on every frame.
    keyframes: bool = True
    # Every stream runs one detector network loaded once (serialised calls; see
    # pipelines.motion.detector.SharedDetector) instead of a model per stream. Not with
    # detector_factory, whose callable makes each stream's detector.
    shared_detector: bool = True
    # The shared detector runs the frames that wait for it with the same input size and shape as one
    # batch, up to this many (pipelines.batching): on a GPU a batch of streams' frames costs little
    # more than one; on the CPU a frame waits for one run instead of every run queued before it
    # (docs/scale-out.md, "Many streams, one detector"). None: 8 where the detector runs on CUDA, 4
    # on the CPU; 1: one frame at a time.
    detector_batch: int | None = Field(None, ge=1, le=64)
    # ... waiting this long for a batch to fill (0: a batch is what waited while the last one ran)
    detector_batch_wait_ms: float = Field(0.0, ge=0, le=100)
    # A second thread per stream prepares each frame (BGR conversion, grey image, ego-motion)
    # while the worker processes the one before, so a stream uses two cores; every stream gets one
    # (it prepares only frames its worker will take), where the server may use two CPUs or more.
    # False: one thread.
    prepare_ahead: bool = True
    # One pipeline is kept built ahead (models loaded), so a new stream starts at once: an RTMP
    # publisher sends from the moment its key is admitted, and the seconds of building a pipeline
    # then would be a burst of frames to drop. False: each stream builds its own when it starts.
    warm_pipeline: bool = True
    # Each stream's engine (detector, optical flow, tracking, U-Net, speeds) in a process of its own
    # (docs/scale-out.md, "Engine processes"): streams no longer take turns on one interpreter lock,
    # and an engine that dies or hangs ends its stream alone. False: a thread per stream in this
    # process, one detector network shared by all (settings.shared_detector).
    engine_processes: bool = False
    # an engine that leaves a frame (or a request) unanswered this long is stopped, and its stream
    # ends as failed; the start and the first frame (models loading) may take engine_start_timeout_s
    engine_timeout_s: float = Field(8.0, gt=0)
    engine_start_timeout_s: float = Field(180.0, gt=0)
    # CPU threads of each engine process and of the detector service: OpenCV's, the OpenVINO
    # detector's, torch's and the BLAS libraries' pools (pipelines.threads). 1: a stream's second
    # core comes from its prepare thread, and engines do not crowd each other (measured against
    # None, every core each: 4 live 1080p streams on the 2-core VM 1.05-1.06x the frames, one stream
    # the same; 16 streams on a 16-core GPU box 1.32x; docs/scale-out.md). None (null): theirs.
    engine_threads: int | None = Field(1, ge=1)
    # Each engine process's (and the detector service's) nice value above the server's (Linux): the
    # server receives and decodes every stream first (aiortc, the H.264 decoders), the engines
    # process with what is left. On a box short of CPU, equal priorities lost a quarter of four
    # 1080p30 streams' frames in the server's full UDP buffers, at random, before its code saw them
    # (docs/scale-out.md, "Receiving comes first"); 0: the server's priority.
    engine_nice: int = Field(10, ge=0, le=19)
    # With engine_processes: one detector for every engine, in a process of its own (the streams'
    # frames batched as shared_detector's are; docs/scale-out.md, "Engine processes"), instead of a
    # copy of the network in each engine. An engine whose service is lost loads its own and goes on.
    engine_detector_service: bool = False
    # A stream that cannot keep up gives up work in steps (pipelines.effort; docs/scale-out.md, "A
    # slow box"): the detector and the road U-Net less often, then every 2nd, 3rd ... frame processed,
    # evenly, up to these bounds (the accuracy the site accepts), holding the latency under
    # adapt_latency_ms; each choice is logged, on the live card and in the session record. False:
    # frames are dropped when the queue is full, whichever they are.
    adapt: bool = True
    adapt_latency_ms: float = Field(150.0, gt=0)
    adapt_max_stride: int = Field(3, ge=1, le=10)  # 3: at least every 3rd frame (10 fps of 30)
    adapt_max_keyframe_interval: int = Field(8, ge=1)  # the detector at least every N processed frames
    adapt_max_road_every_n_frames: int = Field(120, ge=1)
    adapt_min_ego_width: int | None = Field(
        640, ge=64
    )  # camera motion on an image this wide; None: as configured
    # Decoded frames waiting for a stream's worker; beyond this the oldest is dropped. 1: only the
    # latest frame waits (lowest latency, drops a frame after every slow one).
    frame_queue: int = Field(2, ge=1, le=30)

    # RTMP ingest (DJI Pilot 2, DJI Fly): nginx with the RTMP module, started with the server
    # (edge_server/rtmp.py; Debian: nginx-light + libnginx-mod-rtmp). None: off. Without nginx the
    # server runs on, saying why there is no RTMP (log, /healthz).
    rtmp_port: int | None = Field(1935, ge=0, le=65535)
    rtmp_host: str = "0.0.0.0"  # where publishers connect (the RC or phone is on another host)
    # the address pilots type into the app, e.g. rtmp://edge.example.org:1935; default from the
    # Host of the request that made the key and rtmp_port
    rtmp_public_url: str | None = None
    nginx_path: str | None = None  # the nginx binary; default: PATH, /usr/sbin/nginx
    # DJI Cloud API telemetry (docs/dji-apps.md): the server subscribes to the aircraft's OSD
    # (thing/product/{sn}/osd) on an MQTT broker. mqtt_url names a broker of the site's
    # (mqtt://user:password@host:1883); without it the server starts Mosquitto (Debian:
    # mosquitto) on mqtt_port, which pilots log in to with mqtt_username / mqtt_password (default:
    # generated once into <data_dir>/mqtt_password). mqtt_port None and no mqtt_url: off.
    mqtt_url: str | None = None
    mqtt_port: int | None = Field(1883, ge=0, le=65535)
    mqtt_host: str = "0.0.0.0"
    mqtt_username: str = Field("airpatrol", min_length=1, max_length=64, pattern=PLAIN_ID)
    mqtt_password: SecretStr | None = None
    mosquitto_path: str | None = None
    # what Pilot 2 is told to connect to (its Open Platform page, /dji/pilot2), e.g.
    # tcp://edge.example.org:1883; default: the page's host and mqtt_port
    mqtt_public_url: str | None = None
    # the site's DJI Cloud API license (developer.dji.com: app id, app key, app license): Pilot 2
    # verifies it before it connects to any third-party cloud
    dji_app_id: str | None = None
    dji_app_key: SecretStr | None = None
    dji_app_license: SecretStr | None = None
    # OSD telemetry is looked up at (frame's time on the RC's clock - this): how much longer the
    # video takes to reach the server than the OSD of the same instant, beyond what the arrival
    # alignment already takes out (docs/dji-apps.md measures it)
    osd_time_offset_s: float = Field(0.0, ge=-5, le=5)
    # RTSP pull (POST /api/v1/rtsp): the transport asked of the camera
    rtsp_transport: Literal["tcp", "udp"] = "tcp"

    return_video: bool = True  # annotated video back to peers that offer to receive it
    return_video_max_width: int = Field(960, ge=64)
    stats_interval_s: float = Field(2.0, gt=0)  # "stats" messages on the events data channel

    clip_pre_s: float = Field(3.0, ge=0)
    clip_post_s: float = Field(2.0, ge=0)
    clip_fps: float = Field(10.0, gt=0, le=60)
    # Each stream's per-frame tracks and speeds, as the offline runner's speeds.csv (box, track id,
    # class, speed, sigma, ground position, trusted; frame = received frame, time_s = media time), in
    # <data_dir>/tracks/<session id>.csv: for research, and to score a live run against a flight's
    # ground truth (eval.live_tickets --speeds). Off: nothing per frame is kept but the evidence.
    record_tracks: bool = False
    clip_max_width: int = Field(640, ge=64)
    # libx264 preset and quality of the clips: superfast at crf 27 writes a 640 px clip with ~30 % less
    # CPU than veryfast at crf 26, at the same PSNR, in a file ~1.4x larger (docs/api.md)
    clip_preset: Literal["ultrafast", "superfast", "veryfast", "faster", "fast", "medium"] = "superfast"
    clip_crf: int = Field(27, ge=0, le=51)
    snapshot_jpeg_quality: int = Field(90, ge=10, le=100)
    # A stream's end waits at most this long, in all, for its clips; later ones still finish.
    clip_wait_s: float = Field(10.0, ge=0)
    clip_writers: int = Field(2, ge=1, le=8)  # threads writing clips, shared by every stream
    # Clip threads run this much nicer than the streams (Linux), so encoding a clip never takes
    # the CPU a live frame needs; 0: same priority.
    clip_nice: int = Field(10, ge=0, le=19)
    # Evidence packs (docs/evidence.md): each violation's signed pack, made once its clip is
    # written. keys_dir holds the Ed25519 signing key and every public key it had (default
    # <data_dir>/keys; made at the first start: publish its fingerprint, `airpatrol keys show`).
    evidence_packs: bool = True
    keys_dir: Path | None = None
    # Seconds of a pulled stream's received video (RTMP, RTSP) kept as it arrived, so a violation's
    # pack holds its source segment without re-encoding (~1 MB/s at 8 Mbit/s per stream); it must
    # span a violation's wait before it is measured (up to ~20 s) and its post-roll. 0: not kept.
    # WebRTC streams cannot keep it (docs/evidence.md).
    source_video_s: float = Field(30.0, ge=0, le=600)
    # The audit trail (docs/evidence.md): a checkpoint of its head, signed with the evidence key,
    # after every this many entries (and one in each evidence pack)
    audit_checkpoint_every: int = Field(100, ge=1, le=100000)
    # People (issue 41): a sign-in token lasts login_hours (a shift); sign-ins are refused for a
    # while after login_failures_per_user wrong passwords for one name, or
    # login_failures_per_address from one address, within login_window_s.
    login_hours: float = Field(12.0, gt=0, le=24 * 30)
    login_failures_per_user: int = Field(5, ge=1)
    login_failures_per_address: int = Field(20, ge=1)
    login_window_s: float = Field(900.0, gt=0)
    # Retention (issue 41; None keeps for ever): the media of violations that are not enforceable or
    # were dismissed after retention_media_days (the record stays), dismissed violations after
    # retention_dismissed_days, every violation after retention_violation_days; days since the
    # violation. A legal hold keeps a violation whatever these say. A pass every retention_interval_s.
    retention_media_days: float | None = Field(None, gt=0)
    retention_dismissed_days: float | None = Field(None, gt=0)
    retention_violation_days: float | None = Field(None, gt=0)
    retention_interval_s: float = Field(3600.0, ge=10)
    # Outgoing webhooks (issue 41): targets, each event tried until delivered (a 2xx) or
    # dead-lettered (a 4xx other than 408/425/429, or webhook_max_attempts tries; the backoff
    # doubles from 0.5 s up to webhook_backoff_max_s), in order per target; delivered ones are
    # forgotten after webhook_keep_days.
    webhooks: list[WebhookConfig] = []
    webhook_max_attempts: int = Field(50, ge=1)
    webhook_backoff_max_s: float = Field(15.0, gt=0)
    webhook_timeout_s: float = Field(5.0, gt=0)
    webhook_keep_days: float = Field(7.0, gt=0)
    # the console's map (issue 41): the site's tiles as an MBTiles file (raster: png, jpg or webp),
    # served by the server so the map works offline; None: the map shows positions without tiles
    map_tiles: Path | None = None
    # The live counters of each stream are written to its session row this often (a crash
    # loses at most this much of them).
    session_persist_interval_s: float = Field(5.0, gt=0)
    # A track not seen for this long (media time) is finished: its summary goes to the store then
    # (far longer than the tracker's lost-track buffer, so its id never comes back).
    track_summary_idle_s: float = Field(10.0, ge=1.0)

    cors_origins: list[str] = []
    # HTTPS (PEM files, both or neither): a browser gives a page the camera only over HTTPS or on
    # the device's own address, so a phone streaming from /console/publish needs it. nginx's RTMP
    # callbacks then come over a plain-HTTP listener of their own on 127.0.0.1 (nginx-rtmp speaks
    # no TLS).
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None
    # Larger request bodies are refused (413) before they are read; SDP offers are ~5-20 kB.
    max_request_body_bytes: int = Field(1_048_576, ge=4096)
    shutdown_timeout_s: float = Field(20.0, gt=0)
    # While a stream is live, authenticated API reads (GET/HEAD but /healthz) are handled one at
    # a time and paced so that handling them takes at most this share of the time: a burst of
    # dashboard or script reads cannot take the CPU the stream needs (reads wait, none fails).
    # 1 turns pacing off. See docs/api.md.
    live_read_share: float = Field(0.05, gt=0, le=1)
    live_read_burst_s: float = Field(0.5, ge=0)  # handling time reads may take at once first
    live_read_queue: int = Field(256, ge=1)  # reads waiting beyond this get 503 busy (Retry-After)

    @field_validator("database_url")
    @classmethod
    def _strip(cls, v: str | None) -> str | None:
        return v.strip() or None if v is not None else None

    @model_validator(mode="after")
    def _tls_pair(self) -> ServerSettings:
        given = [f for f in (self.tls_certfile, self.tls_keyfile) if f is not None]
        if len(given) == 1:
            raise ValueError("tls_certfile and tls_keyfile go together: give both (PEM files) or neither")
        for path in given:
            if not path.is_file():
                raise ValueError(f"TLS file {path} does not exist")
        return self

    @property
    def scheme(self) -> str:
        return "https" if self.tls_certfile is not None else "http"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        file_source = InitSettingsSource(settings_cls, init_kwargs=dict(_settings_file_data.get() or {}))
        return (init_settings, env_settings, file_source)

    @classmethod
    def load(cls, settings_file: str | Path | None = None, **overrides: Any) -> ServerSettings:
        """Settings from ``overrides`` (None values ignored) > env > YAML file > defaults.

        The YAML file is ``settings_file`` or ``$AIRPATROL_SETTINGS_FILE``; its keys are the
        field names (``api_token``, ``database_url``, ``max_streams`` ...).
        """
        path = settings_file or os.environ.get("AIRPATROL_SETTINGS_FILE")
        data: dict[str, Any] = read_yaml_mapping(path, "settings file", SettingsError) if path else {}
        token = _settings_file_data.set(data)
        try:
            return cls(**{k: v for k, v in overrides.items() if v is not None})
        except ValidationError as exc:
            raise SettingsError(f"invalid server settings{f' in {path}' if path else ''}:\n{exc}") from exc
        finally:
            _settings_file_data.reset(token)

    # -- derived values ------------------------------------------------------------------------

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'airpatrol.db').resolve()}"

    @property
    def resolved_media_dir(self) -> Path:
        return (self.media_dir or self.data_dir / "media").resolve()

    @property
    def resolved_keys_dir(self) -> Path:
        return (self.keys_dir or self.data_dir / "keys").resolve()

    def resolve_server_id(self) -> str:
        """The configured id, else the one kept in ``<data_dir>/server_id`` (made once)."""
        if self.server_id:
            return self.server_id
        path = self.data_dir / "server_id"
        if path.exists():
            value = path.read_text().strip()
            if value:
                return value
        host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:48] or "edge"
        value = f"{host}-{secrets.token_hex(2)}"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
        log.info(
            "this server's id in a fleet: %s (kept in %s; set AIRPATROL_SERVER_ID to name it)", value, path
        )
        return value

    def resolve_api_token(self) -> str:
        """The configured token, else the one kept in ``<data_dir>/api_token`` (created once)."""
        if self.api_token is not None and self.api_token.get_secret_value():
            return self.api_token.get_secret_value()
        path = self.data_dir / "api_token"
        if path.exists():
            value = path.read_text().strip()
            if value:
                return value
        self.data_dir.mkdir(parents=True, exist_ok=True)
        value = secrets.token_urlsafe(32)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(value + "\n")
        log.warning("no AIRPATROL_API_TOKEN set: generated one and stored it in %s", path.resolve())
        return value
