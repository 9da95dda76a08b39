"""Outgoing webhooks' state, for admins (issue 41): each target's queue, the dead letters, and a dead
letter put back in its queue. The targets themselves are settings (``webhooks``)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam

from edge_server.alerts.schemas import WebhookDeliveryOut, WebhookTargetOut
from edge_server.routes.common import ADMIN, ERRORS, ApiError, audit, store_of
from edge_server.schemas import API_PREFIX, ErrorOut
from edge_server.store import MAX_ROW_ID

protected = APIRouter(responses=ERRORS)
DeliveryId = Annotated[int, PathParam(ge=1, le=MAX_ROW_ID, description="delivery id")]


@protected.get(
    f"{API_PREFIX}/webhooks",
    tags=["webhooks"],
    summary="The webhook targets (from the settings) with their queues: pending, delivered, dead",
    dependencies=ADMIN,
)
async def list_webhooks(request: Request) -> list[WebhookTargetOut]:
    store = store_of(request).webhooks
    targets = request.app.state.settings.webhooks

    def read() -> list[WebhookTargetOut]:
        counts = store.counts()
        out = []
        for t in targets:
            last_ok, last_bad = store.last(t.name, True), store.last(t.name, False)
            out.append(
                WebhookTargetOut(
                    name=t.name,
                    url=t.url,
                    events=list(t.events),
                    enforceable_only=t.enforceable_only,
                    **counts.get(t.name, {"pending": 0, "delivered": 0, "dead": 0}),
                    last_delivered_at=last_ok.delivered_at if last_ok else None,
                    last_error=last_bad.last_error if last_bad else None,
                )  # fmt: skip
            )
        return out

    return await asyncio.to_thread(read)


@protected.get(
    f"{API_PREFIX}/webhooks/dead",
    tags=["webhooks"],
    summary="Dead-lettered deliveries, newest first",
    dependencies=ADMIN,
)
async def dead_letters(
    request: Request, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[WebhookDeliveryOut]:
    rows = await asyncio.to_thread(store_of(request).webhooks.dead_letters, limit)
    return [WebhookDeliveryOut.from_row(r) for r in rows]


@protected.post(
    f"{API_PREFIX}/webhooks/deliveries/{{delivery_id}}/retry",
    tags=["webhooks"],
    summary="Put a dead letter back in its target's queue (sent next: it is older than the rest)",
    responses={404: {"model": ErrorOut, "description": "no dead letter of that id"}},
    dependencies=ADMIN,
)
async def retry_delivery(request: Request, delivery_id: DeliveryId) -> WebhookDeliveryOut:
    row = await asyncio.to_thread(store_of(request).webhooks.retry, delivery_id)
    if row is None:
        raise ApiError(404, "not_found", f"no dead-lettered delivery {delivery_id}")
    await audit(request, "webhook.retried", "webhook", delivery_id, None, {"target": row.target})
    dispatcher = getattr(request.app.state, "webhooks", None)
    if dispatcher is not None:
        dispatcher.wake(row.target)
    return WebhookDeliveryOut.from_row(row)
