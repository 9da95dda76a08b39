"""FastAPI application factory and the uvicorn runner behind ``airpatrol serve``."""

from __future__ import annotations

import asyncio
import importlib
import importlib.resources
import logging
import math
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from edge_server import __version__
from edge_server.alerts.webhooks import WebhookDispatcher
from edge_server.api_docs import install_docs
from edge_server.auth.accounts import start_accounts
from edge_server.auth.authenticator import Authenticator
from edge_server.child_process import loopback
from edge_server.console import mount_console
from edge_server.console import router as console
from edge_server.dji_cloud import MqttTarget, OsdSubscriber, parse_mqtt_url
from edge_server.engines.supervisor import EngineProcesses, engine_factory
from edge_server.events import EventBus
from edge_server.evidence.service import start_evidence
from edge_server.guides import router as guides
from edge_server.ice import restrict_ice_host_addresses
from edge_server.loopback_http import LoopbackCallbacks
from edge_server.media import remove_partial_files
from edge_server.media_loop import MediaLoop
from edge_server.metrics import Metrics
from edge_server.middleware import (
    InternalErrorMiddleware,
    LiveReadPacingMiddleware,
    RequestGuardMiddleware,
)
from edge_server.mosquitto import BrokerUnavailable, MosquittoBroker, resolve_password
from edge_server.retention.purge import start_retention
from edge_server.routes import (
    auth,
    dji_apps,
    evidence,
    geo,
    health,
    height,
    live_events,
    retention,
    sessions,
    users,
    violations,
    webhooks,
    webrtc,
)
from edge_server.routes.common import ApiError, json_error
from edge_server.rtmp import RtmpServer, RtmpUnavailable
from edge_server.settings import ServerSettings, SettingsError
from edge_server.store import Store
from edge_server.streams import StreamManager
from pipelines.config import PipelineConfig
from pipelines.errors import AirPatrolError

if TYPE_CHECKING:  # the engine (torch, models) is imported in the background at startup
    from pipelines.motion.detector import Detector
    from pipelines.pipeline import Pipeline
    from pipelines.road_network import RoadSegmenter

log = logging.getLogger(__name__)

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
    503: "unavailable",
}


DESCRIPTION = (
    "Live drone traffic monitoring: WebRTC ingest (phone app offer API and WHIP), telemetry over a "
    "data channel, live violation events, and the violation store. All routes but /healthz, the "
    "sign-in and the guides need `Authorization: Bearer <token>`: a user's sign-in token (POST "
    "/api/v1/auth/login), a machine token, or the server's API token (an admin machine token). "
    "Each route needs a role (read: viewer, officer, admin; publish: publisher, officer, admin; "
    "operate: officer, admin; admin: admin): 403 otherwise. Guides, served by this server: "
    "[API and settings](/guide/api), [telemetry data channel](/guide/telemetry-datachannel), "
    "[DJI apps](/guide/dji-apps), [all](/guide)."
)

# The API's routers in the order of the route table, which is also the order of the OpenAPI
# document's paths: the public routes (no token) first, then those behind the token.
ROUTERS: tuple[APIRouter, ...] = (
    health.public,
    auth.public,
    webrtc.public,
    live_events.public,
    auth.protected,
    health.protected,
    webrtc.protected,
    sessions.protected,
    height.protected,
    violations.protected,
    geo.protected,
    evidence.protected,
    retention.protected,
    webhooks.protected,
    users.protected,
    dji_apps.router,
    dji_apps.callbacks,  # nginx's, authenticated by the secret in the path
    dji_apps.pages,
    guides,
    console,
)


def import_object(spec: str) -> Any:
    """``"package.module:attr"`` -> the object."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SettingsError(f"detector_factory must look like 'package.module:callable', got {spec!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SettingsError(f"cannot import detector_factory {spec!r}: {exc}") from exc
    return obj


def make_pipeline_factory(
    settings: ServerSettings,
    *,
    detector_factory: Callable[[], Detector] | None = None,
    segmenter_factory: Callable[[], RoadSegmenter] | None = None,
    engines: EngineProcesses | None = None,
    metrics: Metrics | None = None,
    shared_detectors: list[Any] | None = None,
) -> Callable[[], Pipeline]:
    """A callable building one fresh pipeline per stream (``build_pipeline``, models injected);
    with ``engines``, each in an engine process of its own (settings.engine_processes). The shared
    detector, once loaded, is appended to ``shared_detectors`` (/healthz) and counted in ``metrics``."""
    config = live_config(
        PipelineConfig.from_yaml(settings.pipeline_config) if settings.pipeline_config else PipelineConfig(),
        settings,
    )
    if config.camera.terrain is not None:  # a bad terrain model is refused at start, not per stream
        from pipelines.terrain_io import TerrainError, load_terrain

        try:
            load_terrain(config.camera.terrain)
        except TerrainError as exc:
            raise SettingsError(str(exc)) from None
    if detector_factory is None and settings.detector_factory:
        detector_factory = import_object(settings.detector_factory)
    if engines is not None:
        return engine_factory(config, settings, engines, detector_factory, segmenter_factory)
    shared: list[Any] = []  # the one detector network of every stream (settings.shared_detector)
    shared_lock = threading.Lock()

    def shared_model() -> Any:
        from pipelines.builder import build_detector_model
        from pipelines.motion.shared_detector import SharedDetector, default_batch

        with shared_lock:
            if not shared:
                model = build_detector_model(config.detector)
                batch = default_batch(model.device, settings.detector_batch)
                shared.append(
                    SharedDetector(
                        model,
                        max_batch=batch,
                        wait_ms=settings.detector_batch_wait_ms,
                        on_batch=metrics.detector_batch if metrics is not None else None,
                    )
                )
                if shared_detectors is not None:
                    shared_detectors.append(shared[0])
            return shared[0]

    def factory() -> Pipeline:
        from pipelines.builder import build_pipeline

        detector = detector_factory() if detector_factory is not None else None
        segmenter = segmenter_factory() if segmenter_factory is not None else None
        model = shared_model() if detector is None and settings.shared_detector else None
        return build_pipeline(config, detector=detector, segmenter=segmenter, model=model)

    return factory


def live_config(config: PipelineConfig, settings: ServerSettings) -> PipelineConfig:
    """The site's pipeline config as live streams run it: keyframes on (``settings.keyframes``)
    unless the site YAML says itself whether they are."""
    if "enabled" in config.keyframes.model_fields_set:
        return config
    return config.with_overrides(keyframes={"enabled": settings.keyframes})


def create_app(
    settings: ServerSettings | None = None,
    *,
    pipeline_factory: Callable[[], Pipeline] | None = None,
    detector_factory: Callable[[], Detector] | None = None,
    segmenter_factory: Callable[[], RoadSegmenter] | None = None,
    ice_host_addresses: list[str] | None = None,
) -> FastAPI:
    """Build the server. Models can be injected (``detector_factory`` is called once per stream)."""
    settings = settings or ServerSettings.load()
    metrics = Metrics()
    engines = None
    shared_detectors: list[Any] = []  # the streams' one detector, once loaded (/healthz)
    if pipeline_factory is None:
        if settings.engine_processes:
            engines = EngineProcesses(
                timeout_s=settings.engine_timeout_s,
                start_timeout_s=settings.engine_start_timeout_s,
                keep_idle=settings.max_streams,  # a process per stream, kept for the next one
                metrics=metrics,
            )
        pipeline_factory = make_pipeline_factory(
            settings,
            detector_factory=detector_factory,
            segmenter_factory=segmenter_factory,
            engines=engines,
            metrics=metrics,
            shared_detectors=shared_detectors,
        )
    if ice_host_addresses:
        restrict_ice_host_addresses(ice_host_addresses)
    api_token = settings.resolve_api_token()
    server_id = settings.resolve_server_id()
    bus = EventBus(queue_size=256)

    lifespan = _lifespan(settings, bus, metrics, pipeline_factory)
    app = FastAPI(
        title="AirPatrol edge server",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.state.api_token = api_token
    app.state.auth = auth = Authenticator(api_token)
    app.state.server_id = server_id
    app.state.metrics = metrics
    app.state.engines = engines  # None: streams' engines are threads of this process
    app.state.shared_detectors = shared_detectors
    app.state.bus = bus
    _add_middleware(app, settings, auth, metrics)
    _include_routers(app)
    install_docs(app)
    mount_console(app)
    _install_error_handlers(app)
    return app


def _add_middleware(app: FastAPI, settings: ServerSettings, auth: Authenticator, metrics: Metrics) -> None:
    """The middleware around the routes. The last one added is the outermost: CORS -> InternalError
    -> RequestGuard -> LiveReadPacing -> routes, so a 401, 413, 503 or 500 still carries the CORS
    headers, and a body over the limit is refused by the guard (not turned into a 500)."""

    def live() -> bool:
        manager = getattr(app.state, "manager", None)
        return manager is not None and manager.active_count > 0

    app.add_middleware(
        LiveReadPacingMiddleware,
        auth=auth,
        live=live,
        share=settings.live_read_share,
        burst_s=settings.live_read_burst_s,
        queue_max=settings.live_read_queue,
        on_paced=metrics.api_read_wait.observe,
        on_refused=metrics.api_reads_refused.inc,
    )
    app.add_middleware(RequestGuardMiddleware, auth=auth, max_body_bytes=settings.max_request_body_bytes)
    app.add_middleware(InternalErrorMiddleware)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=["Location", "ETag"],
        )


def _include_routers(app: FastAPI) -> None:
    """The API's routes (:data:`ROUTERS`), and every route's methods by path for the 405's Allow."""
    for router in ROUTERS:
        app.include_router(router)
    app.state.route_methods = [
        (route.path, route.path_regex, route.methods)
        for router in ROUTERS
        for route in router.routes
        if getattr(route, "methods", None)
    ]


def _lifespan(
    settings: ServerSettings, bus: EventBus, metrics: Metrics, pipeline_factory: Callable[[], Pipeline]
) -> Callable[[FastAPI], Any]:
    """Startup (store, abandoned sessions, stream manager, engine import) and shutdown (streams, store)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        bus.bind(asyncio.get_running_loop())
        settings.resolved_media_dir.mkdir(parents=True, exist_ok=True)
        store = await asyncio.to_thread(
            Store.from_url, settings.resolved_database_url, server_id=app.state.server_id
        )
        abandoned = await asyncio.to_thread(store.mark_abandoned_sessions)
        if abandoned:
            log.warning("marked %d sessions left active by a previous run as failed", abandoned)
        partial = await asyncio.to_thread(remove_partial_files, settings.resolved_media_dir)
        if partial:
            log.warning("removed %d half-written clips and evidence packs left by a previous run", partial)
        app.state.store = store
        evidence, app.state.auditor = await asyncio.to_thread(
            start_evidence, settings, store, app.state.server_id
        )
        app.state.evidence = evidence
        app.state.accounts = start_accounts(app.state.auth, store, app.state.auditor, settings)
        app.state.webhooks = dispatcher = WebhookDispatcher.from_settings(
            settings, store, app.state.server_id, metrics, app.state.auditor.record
        )
        dispatcher.start(bus)
        app.state.retention, retention_task = start_retention(
            settings, store, app.state.server_id, app.state.auditor.record
        )
        media = MediaLoop().start()  # WebRTC media on a loop of its own, apart from HTTP
        app.state.manager = manager = StreamManager(
            settings, store, bus, metrics, pipeline_factory, media, evidence, app.state.auditor
        )
        callbacks = None
        if settings.tls_certfile is not None and settings.rtmp_port is not None:
            callbacks = LoopbackCallbacks(app)  # nginx-rtmp calls in plain HTTP only
            await callbacks.start()
        manager.rtmp.server = await asyncio.to_thread(
            _start_rtmp, app, settings, callbacks.port if callbacks else None
        )
        broker = app.state.mqtt_broker = await asyncio.to_thread(_start_mqtt, app, settings, manager)
        if not settings.engine_processes:  # engine processes import it in their fork server
            # Import the engine now so the first offer does not pay for it (a few seconds on small CPUs).
            await asyncio.to_thread(importlib.import_module, "pipelines.builder")
        await manager.warm_up()
        log.info("AirPatrol edge server ready (database %s)", _redact(settings.resolved_database_url))
        try:
            yield
        finally:
            log.info("shutting down: closing %d streams", app.state.manager.active_count)
            if retention_task is not None:
                retention_task.cancel()
            await app.state.manager.close_all("server shutdown")
            if app.state.engines is not None:  # the processes the streams handed back
                await asyncio.to_thread(app.state.engines.close)
            for shared_detector in app.state.shared_detectors:
                await asyncio.to_thread(shared_detector.close)
            await dispatcher.stop()  # after the streams: their last violations are queued
            if manager.rtmp.server is not None:
                await asyncio.to_thread(manager.rtmp.server.stop)
            if callbacks is not None:
                await callbacks.stop()
            if getattr(app.state, "mqtt", None) is not None:
                await asyncio.to_thread(app.state.mqtt.stop)
            if broker is not None:
                await asyncio.to_thread(broker.stop)
            await asyncio.to_thread(media.stop)
            await asyncio.to_thread(store.close)

    return lifespan


def _start_rtmp(app: FastAPI, settings: ServerSettings, callback_port: int | None) -> RtmpServer | None:
    """nginx for RTMP ingest (settings.rtmp_port), or None, with app.state.rtmp_status saying why.
    A missing nginx or a taken port never stops the server: WebRTC and the API go on.
    ``callback_port``: the loopback plain-HTTP listener of a server on HTTPS (loopback_http)."""
    if settings.rtmp_port is None:
        app.state.rtmp_status = "off"
        return None
    secret = secrets.token_urlsafe(24)
    api_host = "127.0.0.1" if settings.host in ("0.0.0.0", "", "::") else settings.host
    if ":" in api_host:
        api_host = f"[{api_host}]"
    if callback_port is not None:
        api_host = "127.0.0.1"
    try:
        rtmp = RtmpServer(
            settings.data_dir / "rtmp",
            host=settings.rtmp_host,
            port=settings.rtmp_port,
            callback_base=f"http://{api_host}:{callback_port or settings.port}/internal/rtmp/{secret}",
            nginx=settings.nginx_path,
            idle_timeout_s=settings.stream_idle_timeout_s,
        )
        rtmp.start()
    except RtmpUnavailable as exc:
        app.state.rtmp_status = f"unavailable: {exc}"
        log.warning("RTMP ingest (DJI apps) is off: %s", exc)
        return None
    app.state.rtmp_callback_secret = secret
    app.state.rtmp_status = f"running on {settings.rtmp_host}:{settings.rtmp_port}"
    return rtmp


def _start_mqtt(app: FastAPI, settings: ServerSettings, manager: StreamManager) -> MosquittoBroker | None:
    """DJI Cloud API telemetry: Mosquitto (unless ``mqtt_url`` names a broker) and the server's OSD
    subscriber (app.state.mqtt). Like RTMP, a missing broker never stops the server: the reason is
    in app.state.mqtt_status (/healthz)."""
    broker = None
    if settings.mqtt_url:
        try:
            target = parse_mqtt_url(settings.mqtt_url)
        except ValueError as exc:
            raise SettingsError(f"mqtt_url: {exc}") from exc
    elif settings.mqtt_port is not None:
        password = resolve_password(
            settings.data_dir, settings.mqtt_password and settings.mqtt_password.get_secret_value()
        )
        try:
            broker = MosquittoBroker(
                settings.data_dir / "mqtt",
                host=settings.mqtt_host,
                port=settings.mqtt_port,
                username=settings.mqtt_username,
                password=password,
                mosquitto=settings.mosquitto_path,
            )
            broker.start()
        except BrokerUnavailable as exc:
            app.state.mqtt_status = f"unavailable: {exc}"
            log.warning("DJI Cloud API telemetry (MQTT) is off: %s", exc)
            return None
        target = MqttTarget(
            loopback(settings.mqtt_host), settings.mqtt_port, settings.mqtt_username, password
        )
    else:
        app.state.mqtt_status = "off"
        return None
    subscriber = OsdSubscriber(
        target, manager.telemetry.on_osd, client_id=f"airpatrol-edge-{secrets.token_hex(4)}"
    )
    if not subscriber.start(timeout_s=10.0):
        log.warning(
            "MQTT: not connected to %s:%d yet (%s); retrying", target.host, target.port, subscriber.last_error
        )
    app.state.mqtt = subscriber
    return broker


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return json_error(exc.status_code, exc.code, exc.detail, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(
            exc.status_code, HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_")
        )
        detail = exc.detail
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}; see /docs"
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            detail = f"{request.method} is not allowed on {request.url.path}"
            allowed = _allowed_methods(request)
            if allowed:  # Starlette names the methods of the first route of the path only
                headers = {**(headers or {}), "Allow": ", ".join(allowed)}
        return json_error(exc.status_code, code, detail, headers)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()))
            if err.get("type") == "unknown_parameter":  # schemas.StrictQuery: one problem per name
                given = err.get("input") if isinstance(err.get("input"), dict) else {}
                for name, message in err["ctx"]["unknown"].items():
                    problems.append(
                        {"field": f"{loc}.{name}", "message": message, "input": _short(given.get(name))}
                    )
                continue
            problems.append(
                {"field": loc, "message": err.get("msg", "invalid"), "input": _short(err.get("input"))}
            )
        summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
        return JSONResponse(
            {"error": "invalid_request", "detail": summary, "problems": problems}, status_code=422
        )

    @app.exception_handler(AirPatrolError)
    async def user_error(_request: Request, exc: AirPatrolError) -> JSONResponse:
        return json_error(400, "bad_request", str(exc))


def _allowed_methods(request: Request) -> list[str]:
    """Every method some API route takes on this request's path."""
    path = request.url.path
    matches = [
        (t, m) for t, pattern, m in getattr(request.app.state, "route_methods", ()) if pattern.match(path)
    ]
    exact = [m for t, m in matches if t == path]  # /api/v1/webrtc/offer, not /api/v1/webrtc/{session_id}
    return sorted({method for methods in (exact or [m for _, m in matches]) for method in methods})


def _short(value: Any) -> Any:
    """The offending input as the error repeats it: JSON-safe (a NaN or infinity, which Python's
    JSON parser takes, as its text: JSON has no such number and the error would fail to encode)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value if not isinstance(value, str) else value[:200]
    return None


def _redact(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url


def serve(settings: ServerSettings, **app_kwargs: Any) -> None:
    """Run the server with uvicorn until interrupted (SIGINT/SIGTERM shut it down cleanly)."""
    import uvicorn

    app = create_app(settings, **app_kwargs)
    config = uvicorn_config(app, settings, log_level="info", log_config=None)
    log.info(
        "serving on %s://%s:%d (console: /console/, API docs: /docs?token=...)",
        settings.scheme, settings.host, settings.port,
    )  # fmt: skip
    uvicorn.Server(config).run()


def uvicorn_config(app: FastAPI, settings: ServerSettings, **overrides: Any) -> Any:
    """uvicorn's configuration of ``settings`` (address, TLS, graceful shutdown)."""
    import uvicorn

    values: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "access_log": False,
        "timeout_graceful_shutdown": int(settings.shutdown_timeout_s),
    }
    if settings.tls_certfile is not None:
        values.update(ssl_certfile=str(settings.tls_certfile), ssl_keyfile=str(settings.tls_keyfile))
    return uvicorn.Config(app, **{**values, **overrides})
