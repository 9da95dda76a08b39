"""The live events WebSocket (``/api/v1/events``): the event bus (:mod:`edge_server.events`) to a
client as JSON text messages, optionally one session's only. Its token comes as ``?token=`` or
``Authorization: Bearer``, checked here (the route is on the public router): any role that may read."""

from __future__ import annotations

import asyncio
import contextlib

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from edge_server.auth.roles import Access, allowed
from edge_server.events import dumps
from edge_server.routes.common import auth_of
from edge_server.schemas import API_PREFIX

public = APIRouter()


@public.websocket(f"{API_PREFIX}/events")
async def events_ws(websocket: WebSocket, session_id: str | None = None, token: str | None = None) -> None:
    """Live events as JSON text messages. Auth: ``?token=`` or ``Authorization: Bearer``."""
    header = websocket.headers.get("authorization", "")
    given = token or (header[7:].strip() if header.lower().startswith("bearer ") else None)
    principal = await auth_of(websocket.app).principal(given)
    if principal is None or not allowed(principal.role, Access.READ):
        reason = (
            "missing or wrong token" if principal is None else f"role {principal.role.value} may not read"
        )
        await websocket.close(code=1008, reason=reason)
        return
    await websocket.accept()
    bus = websocket.app.state.bus
    metrics = websocket.app.state.metrics
    sub = bus.subscribe(session_id)
    metrics.event_subscribers.set(bus.subscriber_count)
    receiver = asyncio.create_task(_until_disconnect(websocket))
    try:
        manager = websocket.app.state.manager
        await websocket.send_text(dumps({"type": "hello", "active_sessions": sorted(manager.sessions)}))
        while True:
            getter = asyncio.create_task(sub.get())
            done, _ = await asyncio.wait({getter, receiver}, return_when=asyncio.FIRST_COMPLETED)
            if receiver in done:
                getter.cancel()
                break
            await websocket.send_text(dumps(getter.result()))
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        receiver.cancel()
        sub.close()
        metrics.event_subscribers.set(bus.subscriber_count)
        with contextlib.suppress(Exception):
            await websocket.close()


async def _until_disconnect(websocket: WebSocket) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        while True:
            msg = await websocket.receive()
            if msg.get("type") == "websocket.disconnect":
                return
