"""Health and metrics: ``/healthz`` (no auth: liveness, the database, RTMP and MQTT as they are now)
and ``/metrics`` (Prometheus, behind the token)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from edge_server.routes.common import ERRORS, READ, manager_of, store_of


class HealthOut(BaseModel):
    status: Literal["ok", "degraded"]
    database: bool
    active_streams: int
    version: str
    rtmp: str = Field(
        "off",
        description="RTMP ingest: 'running on <port>', 'off', or 'unavailable: <why>' (e.g. nginx missing)",
    )
    server_id: str | None = Field(None, description="this server's id in its fleet (settings.server_id)")
    mqtt: str = Field(
        "off", description="DJI Cloud API telemetry: 'connected to <broker>', 'off', or 'unavailable: <why>'"
    )
    engines: dict[str, Any] | None = Field(
        None,
        description="the streams' engine processes (settings.engine_processes; null: threads of this process): "
        "running, each one's pid and memory (RSS, PSS MB), started, lost by cause (died, hung), the last lost and why",
    )
    detector: dict[str, Any] | None = Field(
        None,
        description="the streams' shared detector, once loaded (null: none yet, engine processes or injected "
        "detectors): device, weights, max_batch, wait_ms, calls, batches, mean_batch, batch_sizes (size -> runs), "
        "queue_ms_mean/p50/p95 (a frame's wait for it), run_ms_mean",
    )
    receiving: dict[str, Any] | None = Field(
        None,
        description="this box's UDP receiving (Linux; null elsewhere): udp_receive_buffer_errors (datagrams "
        "dropped at full receive buffers since the box started, as last read) and overflowing (some within "
        "the last seconds: the server does not read its WebRTC sockets in time and loses frames before its "
        "code sees them; each stream's adapter then gives up work)",
    )


public = APIRouter()
protected = APIRouter(responses=ERRORS)


@public.get(
    "/healthz", response_model=HealthOut, tags=["ops"], summary="Liveness and database check (no auth)"
)
async def healthz(request: Request) -> HealthOut:
    from edge_server import __version__

    db_ok = await asyncio.to_thread(store_of(request).ping)
    return HealthOut(
        status="ok" if db_ok else "degraded",
        database=db_ok,
        active_streams=manager_of(request).active_count,
        version=__version__,
        rtmp=rtmp_status(request.app),
        mqtt=mqtt_status(request.app),
        server_id=getattr(request.app.state, "server_id", None),
        engines=await asyncio.to_thread(engines.health)
        if (engines := getattr(request.app.state, "engines", None))
        else None,
        detector=shared[0].stats()
        if (shared := getattr(request.app.state, "shared_detectors", None))
        else None,
        receiving=_receiving(manager_of(request).services.box_overflow),
    )


def _receiving(overflow: Any) -> dict[str, Any] | None:
    if overflow is None:
        return None
    overflowing = overflow.overflowing(fresh=True)
    return (
        None
        if overflow.total is None
        else {"udp_receive_buffer_errors": overflow.total, "overflowing": overflowing}
    )


def rtmp_status(app: Any) -> str:
    """RTMP ingest as it is now: nginx may have died since it started."""
    manager = getattr(app.state, "manager", None)
    rtmp = manager.rtmp.server if manager is not None else None
    if rtmp is not None and not rtmp.running:
        return f"unavailable: nginx exited ({rtmp.workdir / 'error.log'}: {rtmp.error_tail() or 'no log'})"
    return getattr(app.state, "rtmp_status", "off")


def mqtt_status(app: Any) -> str:
    subscriber = getattr(app.state, "mqtt", None)
    if subscriber is None:
        return getattr(app.state, "mqtt_status", "off")
    where = f"{subscriber.target.host}:{subscriber.target.port}"
    if subscriber.connected:
        return f"connected to {where}"
    return f"unavailable: not connected to {where} ({subscriber.last_error or 'connecting'})"


@protected.get(
    "/metrics", tags=["ops"], summary="Prometheus metrics", response_class=Response, dependencies=READ
)
async def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
