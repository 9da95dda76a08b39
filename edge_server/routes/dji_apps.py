"""Routes for the stock DJI apps and cameras: RTMP stream keys, nginx's publish callbacks, RTSP
pull, and the operator's flight values for streams without telemetry. See docs/dji-apps.md."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field

from edge_server.pilot2 import PILOT2_PAGE
from edge_server.pull import StreamUnavailable
from edge_server.routes.common import (
    ADMIN,
    ERRORS,
    PUBLISH,
    STOP_RESPONSES,
    ApiError,
    SessionId,
    audit,
    manager_of,
    remote_of,
    start_errors,
    stop_stream,
    store_of,
)
from edge_server.routes.health import mqtt_status
from edge_server.rtmp import RTMP_APP
from edge_server.schemas import (
    API_PREFIX,
    ErrorOut,
    OperatorTelemetryIn,
    RtmpKeyCreated,
    RtmpKeyIn,
    RtmpKeyOut,
    RtspIn,
    StopOut,
    StreamStartedOut,
)
from edge_server.store import RtmpKeyRow
from edge_server.streams import CapacityError, KeyBusy, PipelineUnavailable, RtmpKeyRef, operator_fields
from pipelines.camera import UnknownCameraError, get_profile
from pipelines.errors import TelemetryError
from pipelines.telemetry import validate_telemetry
from pipelines.types import Telemetry


class MqttLoginOut(BaseModel):
    host: str = Field(description="tcp://host:port, as Pilot 2's thing module takes it")
    username: str | None
    password: str | None


class DjiLicenseOut(BaseModel):
    app_id: str
    app_key: str
    license: str


class Pilot2ConfigOut(BaseModel):
    workspace_name: str
    mqtt: MqttLoginOut
    license: DjiLicenseOut | None = Field(
        description="the site's DJI Cloud API license; null when not configured"
    )
    license_missing: str | None = Field(None, description="what to configure when license is null")


log = logging.getLogger(__name__)

router = APIRouter(responses=ERRORS)
callbacks = APIRouter(include_in_schema=False)  # nginx's, authenticated by the secret in the path
pages = APIRouter(include_in_schema=False)  # public pages with no secret in them

KeyId = Annotated[str, PathParam(min_length=1, max_length=16, pattern=r"^[a-f0-9]+$", description="key id")]
MAX_KEY_CHARS = 128  # ours are 32; a longer stream name is no key of this server


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def operator_telemetry(values: dict[str, Any] | OperatorTelemetryIn | None) -> Telemetry | None:
    """The operator's values as the engine's telemetry (the same plausibility checks as a flight's);
    ValueError says what is wrong."""
    if values is None:
        return None
    if isinstance(values, OperatorTelemetryIn):
        values = values.model_dump(exclude_none=True)
    if values.get("camera"):
        try:
            get_profile(values["camera"])
        except UnknownCameraError as exc:
            raise ValueError(str(exc)) from exc
    t = Telemetry(timestamp_s=0.0, source="operator", **values)
    try:
        return validate_telemetry(t)
    except TelemetryError as exc:
        raise ValueError(str(exc)) from exc


def _operator_or_400(values: OperatorTelemetryIn | None) -> Telemetry | None:
    try:
        return operator_telemetry(values)
    except ValueError as exc:
        raise ApiError(400, "invalid_operator_telemetry", str(exc)) from exc


def _key_out(row: RtmpKeyRow, request: Request) -> dict[str, Any]:
    live = manager_of(request).rtmp.find_id(row.id)
    return {
        "id": row.id,
        "name": row.name,
        "device_sn": row.device_sn,
        "operator": row.operator,
        "created_at": row.created_at,
        "last_used_at": row.last_used_at,
        "live_session_id": live.id if live else None,
    }


def _rtmp_url(request: Request, key: str) -> str:
    settings = request.app.state.settings
    if settings.rtmp_public_url:
        return f"{settings.rtmp_public_url.rstrip('/')}/{RTMP_APP}/{key}"
    host = urlsplit(str(request.base_url)).hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"rtmp://{host}:{settings.rtmp_port}/{RTMP_APP}/{key}"


@router.post(
    f"{API_PREFIX}/rtmp/keys",
    status_code=201,
    response_model=RtmpKeyCreated,
    tags=["ingest"],
    summary="Make an RTMP stream key: the URL a pilot enters in DJI Pilot 2 or DJI Fly",
    responses={400: {"model": ErrorOut}},
    dependencies=ADMIN,
)
async def create_rtmp_key(request: Request, body: RtmpKeyIn) -> RtmpKeyCreated:
    _operator_or_400(body.operator)
    key = secrets.token_urlsafe(24)
    key_id = secrets.token_hex(4)
    operator = body.operator.model_dump(exclude_none=True) if body.operator else None
    row = await asyncio.to_thread(
        store_of(request).add_rtmp_key,
        key_id,
        hash_key(key),
        name=body.name,
        device_sn=body.device_sn,
        operator=operator,
    )
    log.info("RTMP key %s made (%s)", key_id, body.name or "no name")
    await audit(
        request,
        "rtmp_key.created",
        "rtmp_key",
        key_id,
        None,
        {"name": body.name, "device_sn": body.device_sn},
    )
    return RtmpKeyCreated(**_key_out(row, request), key=key, url=_rtmp_url(request, key))


@router.get(
    f"{API_PREFIX}/rtmp/keys",
    response_model=list[RtmpKeyOut],
    tags=["ingest"],
    summary="The RTMP stream keys (without the keys themselves) and which one streams now",
    dependencies=ADMIN,
)
async def list_rtmp_keys(request: Request) -> list[RtmpKeyOut]:
    rows = await asyncio.to_thread(store_of(request).list_rtmp_keys)
    return [RtmpKeyOut(**_key_out(row, request)) for row in rows]


@router.delete(
    f"{API_PREFIX}/rtmp/keys/{{key_id}}",
    status_code=204,
    response_class=Response,
    tags=["ingest"],
    summary="Revoke an RTMP stream key; its live stream, if any, ends (flushed and stored)",
    responses={404: {"model": ErrorOut}},
    dependencies=ADMIN,
)
async def delete_rtmp_key(request: Request, key_id: KeyId) -> Response:
    if not await asyncio.to_thread(store_of(request).delete_rtmp_key, key_id):
        raise ApiError(404, "not_found", f"no RTMP key {key_id}")
    await audit(request, "rtmp_key.revoked", "rtmp_key", key_id)
    live = manager_of(request).rtmp.find_id(key_id)
    if live is not None:
        await manager_of(request).close(live.id, "RTMP key revoked")
    return Response(status_code=204)


@router.delete(
    f"{API_PREFIX}/rtmp/streams/{{session_id}}",
    tags=["ingest"],
    summary="End an RTMP stream (the publisher is disconnected; the app may reconnect: revoke its key to stop it)",
    response_model=StopOut,
    responses=STOP_RESPONSES,
    dependencies=PUBLISH,
)
async def rtmp_stop(request: Request, session_id: SessionId) -> JSONResponse:
    return await stop_stream(request, session_id, "ended by operator", "RTMP stream", kind="rtmp")


@router.post(
    f"{API_PREFIX}/rtsp",
    status_code=201,
    response_model=StreamStartedOut,
    tags=["ingest"],
    summary="Pull an RTSP stream (DJI Dock, a fixed camera) into a new session",
    responses={
        400: {"model": ErrorOut, "description": "the camera cannot be reached, or sends no video"},
        503: {"model": ErrorOut},
    },
    dependencies=PUBLISH,
)
async def rtsp_start(request: Request, body: RtspIn) -> StreamStartedOut:
    operator = _operator_or_400(body.operator)
    try:
        with start_errors():
            sess = await manager_of(request).pull.create(
                body.url, "rtsp", remote_of(request), operator=operator, device_sn=body.device_sn
            )
    except StreamUnavailable as exc:
        raise ApiError(400, "stream_unavailable", str(exc)) from exc
    return _started(sess.id, "rtsp")


def _started(session_id: str, kind: str) -> StreamStartedOut:
    return StreamStartedOut(
        session_id=session_id,
        kind=kind,
        events_url=f"{API_PREFIX}/events?session_id={session_id}",
        session_url=f"{API_PREFIX}/sessions/{session_id}",
    )


@router.delete(
    f"{API_PREFIX}/rtsp/{{session_id}}",
    tags=["ingest"],
    summary="End an RTSP stream",
    response_model=StopOut,
    responses=STOP_RESPONSES,
    dependencies=PUBLISH,
)
async def rtsp_stop(request: Request, session_id: SessionId) -> JSONResponse:
    return await stop_stream(request, session_id, "ended by client", "RTSP stream", kind="rtsp")


@router.put(
    f"{API_PREFIX}/sessions/{{session_id}}/operator-telemetry",
    response_model=OperatorTelemetryIn,
    tags=["sessions"],
    summary="Set the altitude, gimbal pitch and camera of a live stream that carries no telemetry",
    responses={400: {"model": ErrorOut}, 404: {"model": ErrorOut}},
    dependencies=PUBLISH,
)
async def set_operator_telemetry(
    request: Request, session_id: SessionId, body: OperatorTelemetryIn
) -> OperatorTelemetryIn:
    operator = _operator_or_400(body)
    sess = manager_of(request).get(session_id)
    if sess is None:
        raise ApiError(404, "not_found", f"no active stream {session_id}")
    sess.operator = operator  # one reference swap: the worker reads it on its next frame
    log.info("session %s: operator telemetry %s", session_id, operator_fields(operator) if operator else None)
    return body


# ------------------------------------------------------------------------------------------------
# DJI Pilot 2's Open Platform page (edge_server/pilot2.py)


@pages.get("/dji/pilot2")
async def pilot2_page() -> HTMLResponse:
    return HTMLResponse(PILOT2_PAGE, headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})


@router.get(
    f"{API_PREFIX}/dji/pilot2-config",
    response_model=Pilot2ConfigOut,
    tags=["ingest"],
    summary="What DJI Pilot 2's Open Platform page (/dji/pilot2) tells the app: the MQTT login and the DJI license",
    responses={
        409: {"model": ErrorOut, "description": "DJI Cloud API telemetry (MQTT) is off on this server"}
    },
    dependencies=PUBLISH,
)
async def pilot2_config(request: Request) -> Pilot2ConfigOut:
    settings = request.app.state.settings
    subscriber = getattr(request.app.state, "mqtt", None)
    if subscriber is None:
        raise ApiError(409, "mqtt_off", f"DJI Cloud API telemetry is {mqtt_status(request.app)}")
    target = subscriber.target
    host = settings.mqtt_public_url
    if not host:
        port = target.port if settings.mqtt_url else settings.mqtt_port
        page_host = urlsplit(str(request.base_url)).hostname or "127.0.0.1"
        if target.host not in ("127.0.0.1", "localhost"):  # a broker elsewhere: its own address
            page_host = target.host
        host = f"tcp://{page_host}:{port}"
    license = None
    if settings.dji_app_id and settings.dji_app_key and settings.dji_app_license:
        license = DjiLicenseOut(
            app_id=settings.dji_app_id,
            app_key=settings.dji_app_key.get_secret_value(),
            license=settings.dji_app_license.get_secret_value(),
        )
    return Pilot2ConfigOut(
        workspace_name=f"AirPatrol {urlsplit(str(request.base_url)).hostname}",
        mqtt=MqttLoginOut(host=host, username=target.username, password=target.password),
        license=license,
        license_missing=None
        if license
        else "no DJI Cloud API license: set dji_app_id, dji_app_key and dji_app_license (developer.dji.com)",
    )


# ------------------------------------------------------------------------------------------------
# nginx's callbacks (notify_method get): on_publish admits or refuses a publisher by its key


def _callback_ok(request: Request, secret: str) -> None:
    expected = getattr(request.app.state, "rtmp_callback_secret", None)
    if not expected or not hmac.compare_digest(secret.encode(), expected.encode()):
        raise ApiError(404, "not_found", "no such route")


def _refuse(request: Request, status: int, reason: str, detail: str) -> Response:
    request.app.state.metrics.ingest_rejected.labels("rtmp", reason).inc()
    log.warning("RTMP publisher %s refused: %s", request.query_params.get("addr", "?"), detail)
    return Response(detail, status_code=status, media_type="text/plain")


@callbacks.get("/internal/rtmp/{secret}/publish")
async def rtmp_on_publish(request: Request, secret: str) -> Response:
    _callback_ok(request, secret)
    q = request.query_params
    key, addr = q.get("name", ""), q.get("addr")
    if q.get("app") != RTMP_APP:
        return _refuse(
            request, 403, "wrong app", f"application {q.get('app')!r}: publish to /{RTMP_APP}/<key>"
        )
    row = None
    if key and len(key) <= MAX_KEY_CHARS:
        row = await asyncio.to_thread(store_of(request).rtmp_key_by_hash, hash_key(key))
    if row is None:
        return _refuse(request, 403, "wrong key", "unknown stream key")
    try:
        operator = operator_telemetry(row.operator)
    except ValueError:
        operator = None
        log.warning("RTMP key %s: stored operator telemetry no longer valid; ignored", row.id)
    ref = RtmpKeyRef(row.id, row.name, key, q.get("clientid"), row.device_sn)
    remote = (
        f"{addr} (RTMP key {row.id}{f' {row.name}' if row.name else ''})" if addr else f"RTMP key {row.id}"
    )
    try:
        await manager_of(request).rtmp.admit(ref, remote, operator)
    except CapacityError as exc:
        return _refuse(request, 503, "at capacity", str(exc))
    except KeyBusy as exc:
        return _refuse(request, 409, "key busy", str(exc))
    except PipelineUnavailable as exc:
        return _refuse(request, 503, "pipeline unavailable", str(exc))
    live = manager_of(request).rtmp.find(key)
    if live is None or live.closing:  # ended (API, revoked key) while nginx waited for this answer
        return _refuse(request, 403, "ended", "the stream was ended before it started")
    await asyncio.to_thread(store_of(request).touch_rtmp_key, row.id)
    log.info("RTMP publisher %s admitted with key %s", addr or "?", row.id)
    return Response("ok", media_type="text/plain")


@callbacks.get("/internal/rtmp/{secret}/publish_done")
async def rtmp_on_publish_done(request: Request, secret: str) -> Response:
    _callback_ok(request, secret)
    q = request.query_params
    key = q.get("name", "")
    if key and len(key) <= MAX_KEY_CHARS:
        manager = manager_of(request)
        if manager.rtmp.find(key) is not None:  # ending it flushes the stream: nginx need not wait
            manager.spawn(manager.rtmp.publish_done(key, q.get("clientid")))
    return Response("ok", media_type="text/plain")


__all__ = ["callbacks", "hash_key", "operator_telemetry", "pages", "router"]
