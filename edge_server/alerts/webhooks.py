"""Outgoing webhooks (issue 41): every event a target wants, as a signed JSON POST, delivered in
order, retried until it is taken, dead-lettered when it never will be.

* **Queued durably**: the event bus hands each event to :meth:`WebhookDispatcher.on_event` (on the
  event loop); one row per target goes into ``webhook_deliveries`` through a single writer thread
  (so the rows' ids follow the events' order) within milliseconds.
* **In order**: one task per target sends its oldest pending row, and the next only once that one
  is delivered or dead-lettered; a target that is down holds its queue (nothing overtakes).
* **Retries**: a connection error, a timeout, 408, 425, 429 or a 5xx is tried again after 0.5 s,
  1 s, 2 s, ... up to ``webhook_backoff_max_s`` (15 s) between tries, so a receiver back from an
  outage gets the whole queue within that much time plus the sending; a ``Retry-After`` is
  honoured up to the same cap.
* **Dead letters**: another 4xx (the receiver refuses this request for good) at once, any other
  failure after ``webhook_max_attempts`` (50: about 12 minutes) tries; the next row then goes. Dead
  letters are listed by the API and can be re-queued (``POST /api/v1/webhooks/deliveries/{id}/retry``).
* **Signed**: :mod:`edge_server.alerts.signing` (HMAC-SHA256 over the timestamp and the exact body,
  an ``Idempotency-Key`` that is the event's id at every try).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import httpx

from edge_server import __version__
from edge_server.alerts.signing import EVENT_HEADER, IDEMPOTENCY_HEADER, SIGNATURE_HEADER, sign
from edge_server.store.models import WebhookDeliveryRow, utcnow

if TYPE_CHECKING:
    from edge_server.events import EventBus
    from edge_server.metrics import Metrics
    from edge_server.settings import ServerSettings, WebhookConfig
    from edge_server.store import Store

log = logging.getLogger(__name__)

RETRYABLE = frozenset({408, 425, 429})
LISTENER = "webhooks"
FIRST_BACKOFF_S = 0.5
IDLE_CHECK_S = 5.0  # a target with nothing queued looks again this often (besides being woken)


def wanted(target: WebhookConfig, event: dict[str, Any]) -> bool:
    kind = event.get("type")
    if kind not in target.events:
        return False
    if kind == "violation" and target.enforceable_only:
        return (event.get("violation") or {}).get("status") == "enforceable"
    return True


def backoff_s(attempts: int, cap_s: float) -> float:
    """Seconds before try ``attempts + 1``: 0.5, 1, 2, ... capped."""
    return min(cap_s, FIRST_BACKOFF_S * 2 ** max(0, attempts - 1))


class WebhookDispatcher:
    def __init__(
        self,
        store: Store,
        targets: list[WebhookConfig],
        server_id: str | None,
        *,
        max_attempts: int = 50,
        backoff_max_s: float = 15.0,
        timeout_s: float = 5.0,
        keep_days: float = 7.0,
        metrics: Metrics | None = None,
        audit: Callable[..., Any] | None = None,
    ) -> None:
        self.store = store
        self.targets = {t.name: t for t in targets}
        self.server_id = server_id
        self.max_attempts = max_attempts
        self.backoff_max_s = backoff_max_s
        self.timeout_s = timeout_s
        self.keep_days = keep_days
        self.metrics = metrics
        self._audit = audit
        self._writer: ThreadPoolExecutor | None = None
        self._wake: dict[str, asyncio.Event] = {}
        self._tasks: list[asyncio.Task] = []
        self._client: httpx.AsyncClient | None = None
        self._bus: EventBus | None = None
        self.queued = 0

    @classmethod
    def from_settings(
        cls,
        settings: ServerSettings,
        store: Store,
        server_id: str,
        metrics: Metrics | None,
        audit: Callable | None,
    ) -> WebhookDispatcher:
        return cls(
            store, settings.webhooks, server_id, max_attempts=settings.webhook_max_attempts,
            backoff_max_s=settings.webhook_backoff_max_s, timeout_s=settings.webhook_timeout_s,
            keep_days=settings.webhook_keep_days, metrics=metrics, audit=audit,
        )  # fmt: skip

    # -- life ---------------------------------------------------------------------------------------

    def start(self, bus: EventBus) -> None:
        """On the event loop: listen to the bus and start one sender per target."""
        if not self.targets:
            return
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="webhook-queue")
        self._client = httpx.AsyncClient(timeout=self.timeout_s, follow_redirects=False)
        self._bus = bus
        for name in self.targets:
            self._wake[name] = asyncio.Event()
            self._tasks.append(
                asyncio.get_running_loop().create_task(self._sender(name), name=f"webhook-{name}")
            )
        bus.add_listener(LISTENER, self.on_event)
        self._writer.submit(self._forget_old)
        log.info("webhooks: %d targets (%s)", len(self.targets), ", ".join(self.targets))

    async def stop(self) -> None:
        if self._tasks:
            await asyncio.sleep(0.1)  # events the streams published as they closed reach on_event first
        if self._bus is not None:
            self._bus.remove_listener(LISTENER)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._writer is not None:
            await asyncio.to_thread(self._writer.shutdown, True)  # what was queued is written
        if self._client is not None:
            await self._client.aclose()

    # -- queueing -----------------------------------------------------------------------------------

    def on_event(self, event: dict[str, Any]) -> None:
        """The bus listener (event loop thread): one row per target that wants the event."""
        names = [name for name, target in self.targets.items() if wanted(target, event)]
        if not names or self._writer is None:
            return
        event_id = str(uuid.uuid4())
        body = {
            "id": event_id,
            "type": event["type"],
            "server_id": self.server_id,
            "created_at": utcnow().isoformat(),
            "data": event,
        }
        payload = json.dumps(body, separators=(",", ":"), default=str)
        rows = [
            {"target": n, "event_id": event_id, "event_type": event["type"], "payload": payload,
             "server_id": self.server_id}
            for n in names
        ]  # fmt: skip
        future = self._writer.submit(self.store.webhooks.add, rows)
        loop = asyncio.get_running_loop()
        future.add_done_callback(lambda f: loop.call_soon_threadsafe(self._queued, names, f))

    def _queued(self, names: list[str], future: Any) -> None:
        if future.exception() is not None:
            log.error("webhooks: an event could not be queued: %s", future.exception())
            return
        self.queued += len(names)
        for name in names:
            self._wake[name].set()

    def _forget_old(self) -> None:
        try:
            gone = self.store.webhooks.forget_delivered(utcnow() - dt.timedelta(days=self.keep_days))
            if gone:
                log.info("webhooks: forgot %d deliveries older than %g days", gone, self.keep_days)
        except Exception:  # noqa: BLE001 - housekeeping only
            log.exception("webhooks: old deliveries not forgotten")

    def wake(self, target: str) -> None:
        if target in self._wake:
            self._wake[target].set()

    # -- sending ------------------------------------------------------------------------------------

    async def _sender(self, name: str) -> None:
        wake = self._wake[name]
        while True:
            try:
                row = await asyncio.to_thread(self.store.webhooks.next_pending, name)
            except Exception:  # noqa: BLE001 - the database is back later; the queue is there
                log.exception("webhooks %s: the queue cannot be read", name)
                row = None
            if row is None:
                wake.clear()
                await self._wait(wake, IDLE_CHECK_S)
                continue
            due = (row.next_attempt_at - utcnow()).total_seconds()
            if due > 0:
                wake.clear()
                await self._wait(wake, min(due, 1.0))  # a retry made now (the API) is seen within 1 s
                continue
            await self._attempt(self.targets[name], row)

    @staticmethod
    async def _wait(event: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)

    async def _attempt(self, target: WebhookConfig, row: WebhookDeliveryRow) -> None:
        assert self._client is not None
        body = row.payload.encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": f"AirPatrol-webhooks/{__version__}",
            EVENT_HEADER: row.event_type,
            IDEMPOTENCY_HEADER: row.event_id,
            "X-AirPatrol-Delivery": str(row.id),
            SIGNATURE_HEADER: sign(target.secret.get_secret_value(), body, int(time.time())),
        }
        attempts = row.attempts + 1
        status: int | None = None
        retry_after: float | None = None
        try:
            response = await self._client.post(target.url, content=body, headers=headers)
            status = response.status_code
            error = f"HTTP {status}: {response.text[:200]}"
            retry_after = _retry_after(response.headers.get("retry-after"))
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"[:300] or type(exc).__name__
        await asyncio.to_thread(self._settle, target, row, attempts, status, error, retry_after)

    def _settle(
        self, target: WebhookConfig, row: WebhookDeliveryRow, attempts: int, status: int | None, error: str,
        retry_after: float | None,
    ) -> None:  # fmt: skip
        store = self.store.webhooks
        if status is not None and 200 <= status < 300:
            store.delivered(row.id, attempts, status)
            self._count(target.name, "delivered", (utcnow() - row.created_at).total_seconds())
            return
        permanent = status is not None and 400 <= status < 500 and status not in RETRYABLE
        if permanent or attempts >= self.max_attempts:
            store.dead(row.id, attempts, status, error)
            self._count(target.name, "dead")
            why = "refused for good" if permanent else f"{attempts} tries"
            log.warning(
                "webhook %s: delivery %d (%s) dead-lettered, %s: %s",
                target.name,
                row.id,
                row.event_type,
                why,
                error,
            )
            if self._audit is not None:
                self._audit("webhooks", "webhook.dead_lettered", "webhook", row.id, None,
                            {"target": target.name, "event_id": row.event_id, "attempts": attempts, "status": status},
                            error[:500])  # fmt: skip
            return
        wait = backoff_s(attempts, self.backoff_max_s)
        if retry_after is not None:
            wait = min(self.backoff_max_s, max(wait, retry_after))
        store.failed(row.id, attempts, utcnow() + dt.timedelta(seconds=wait), status, error)
        self._count(target.name, "retried")
        if attempts == 1 or attempts % 10 == 0:
            log.warning(
                "webhook %s: delivery %d failed (try %d), again in %.1f s: %s",
                target.name,
                row.id,
                attempts,
                wait,
                error,
            )

    def _count(self, target: str, outcome: str, delay_s: float | None = None) -> None:
        if self.metrics is None:
            return
        self.metrics.webhook_deliveries.labels(target=target, outcome=outcome).inc()
        if delay_s is not None:
            self.metrics.webhook_delay.observe(max(0.0, delay_s))


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


__all__ = ["WebhookDispatcher", "backoff_s", "wanted"]
