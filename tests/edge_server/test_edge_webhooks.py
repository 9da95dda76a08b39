"""Outgoing webhooks (edge_server.alerts): signed JSON POSTs to a real receiver on 127.0.0.1 (tests/
webhook_receiver.py, which checks them as a dispatch system would): only what a target wants,
delivered in order across an outage and a server restart, retried, dead-lettered (at once for a
permanent refusal, else after the tries), re-queued by an admin; a changed body, another secret, an
old timestamp and a second copy are each refused by the receiver's check."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from edge_helpers import violation_recorder
from test_edge_alerts import speeding
from webhook_receiver import SECRET, Receiver

from edge_server.alerts.signing import WebhookReceiver, WebhookRefused, sign, verify
from edge_server.alerts.webhooks import backoff_s, wanted
from edge_server.settings import WebhookConfig

BODY = b'{"id":"e1","type":"violation"}'


def wait_for(predicate, timeout: float) -> None:
    """Until ``predicate()`` holds (polled every 50 ms), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_signature_checks_and_a_tampered_request_does_not() -> None:
    now = 1_800_000_000
    header = sign(SECRET, BODY, now)
    assert verify(SECRET, BODY, header, now=now + 10) == now
    for body, secret, at, why in [
        (BODY + b" ", SECRET, now, "does not match"),  # a changed body
        (BODY, "another-secret-0123456789", now, "does not match"),
        (BODY, SECRET, now + 301, "replayed or delayed"),  # an old request sent again
        (BODY, SECRET, now - 301, "replayed or delayed"),
    ]:
        with pytest.raises(WebhookRefused, match=why):
            verify(secret, body, header, now=at)
    for bad in (None, "", "t=x,v1=y", "v1=abc"):
        with pytest.raises(WebhookRefused, match="header|malformed"):
            verify(SECRET, BODY, bad, now=now)


def test_the_receiver_acts_once_per_idempotency_key() -> None:
    receiver = WebhookReceiver(SECRET)
    headers = {"X-AirPatrol-Signature": sign(SECRET, BODY, int(time.time())), "Idempotency-Key": "e1"}
    assert receiver.check(headers, BODY) == "e1"
    with pytest.raises(WebhookRefused, match="already received e1"):
        receiver.check(headers, BODY)
    with pytest.raises(WebhookRefused, match="no Idempotency-Key"):
        receiver.check({"X-AirPatrol-Signature": headers["X-AirPatrol-Signature"]}, BODY)


TARGET = WebhookConfig(name="dispatch", url="http://127.0.0.1:1/hook", secret="x" * 16)


@pytest.mark.parametrize(
    ("target", "event", "sent"),
    [
        (TARGET, {"type": "violation", "violation": {"status": "enforceable"}}, True),
        (TARGET, {"type": "violation", "violation": {"status": "not_enforceable"}}, False),
        (
            TARGET.model_copy(update={"enforceable_only": False}),
            {"type": "violation", "violation": {"status": "held"}},
            True,
        ),
        (TARGET, {"type": "violation.updated", "violation": {"status": "dismissed"}}, False),
        (
            TARGET.model_copy(update={"events": ["violation.updated"]}),
            {"type": "violation.updated", "violation": {}},
            True,
        ),
        (TARGET, {"type": "session.started"}, False),
    ],
)
def test_what_a_target_wants(target, event, sent) -> None:
    assert wanted(target, event) is sent


@pytest.mark.parametrize(
    ("attempts", "wait"), [(1, 0.5), (2, 1.0), (3, 2.0), (5, 8.0), (6, 15.0), (40, 15.0)]
)
def test_backoff_doubles_up_to_the_cap(attempts, wait) -> None:
    assert backoff_s(attempts, 15.0) == wait


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


def _server(server_factory, receiver: Receiver, **overrides):
    hooks = [{"name": "dispatch", "url": receiver.url, "secret": SECRET}]
    values = {"webhooks": hooks, "webhook_backoff_max_s": 0.3, **overrides}
    return server_factory(**values)


def _record(server, n: int, status: str = "enforceable", start: int = 0) -> list[int]:
    recorder = violation_recorder(server.app, server.settings, "hooks")
    now = dt.datetime.now(dt.timezone.utc)
    return [recorder.record(speeding(status, track_id=start + k), None, None, now).id for k in range(n)]


def _acted_ids(receiver: Receiver) -> list[int]:
    return [r.event["data"]["violation"]["id"] for r in receiver.acted]


def test_enforceable_violations_are_posted_signed(server_factory, receiver: Receiver) -> None:
    srv = _server(server_factory, receiver)
    _record(srv, 1, "not_enforceable")
    ids = _record(srv, 2, start=5)
    wait_for(lambda: len(receiver.acted) == 2, 10)
    assert _acted_ids(receiver) == ids and receiver.refused == []
    body = receiver.acted[0].event
    assert body["type"] == "violation" and body["server_id"] == srv.app.state.server_id
    assert body["id"] == receiver.acted[0].key and body["data"]["violation"]["ticket_speed_kmh"] == 72.0
    with srv.client() as c:
        (target,) = c.get("/api/v1/webhooks").json()
    assert target["name"] == "dispatch" and (target["pending"], target["delivered"], target["dead"]) == (
        0,
        2,
        0,
    )
    assert "secret" not in target


def test_in_order_after_an_outage(server_factory, receiver: Receiver) -> None:
    srv = _server(server_factory, receiver)
    receiver.stop()  # down: connection refused
    ids = _record(srv, 8)
    time.sleep(1.5)  # a few failed tries of the first
    assert receiver.acted == []
    receiver.start()
    back = time.monotonic()
    wait_for(lambda: len(receiver.acted) == 8, 10)
    assert _acted_ids(receiver) == ids  # in order, each acted on once
    assert time.monotonic() - back < 0.3 + 2.0  # the backoff cap, then the queue at once


def test_a_queue_outlives_a_restart(server_factory, receiver: Receiver) -> None:
    first = _server(server_factory, receiver)
    receiver.stop()
    ids = _record(first, 3)
    time.sleep(0.5)
    first.stop()
    receiver.start()
    _server(server_factory, receiver, data_dir=first.settings.data_dir)
    wait_for(lambda: len(receiver.acted) == 3, 10)
    assert _acted_ids(receiver) == ids


def test_dead_letters_and_their_retry(server_factory, receiver: Receiver) -> None:
    srv = _server(server_factory, receiver, webhook_max_attempts=3)
    receiver.status = 400  # refused for good: dead at once
    (refused,) = _record(srv, 1)
    with srv.client() as c:
        wait_for(lambda: len(c.get("/api/v1/webhooks/dead").json()) == 1, 10)
        receiver.status = 503  # a server error: tried 3 times, then dead
        (failing,) = _record(srv, 1, start=1)
        wait_for(lambda: len(c.get("/api/v1/webhooks/dead").json()) == 2, 10)
        dead = c.get("/api/v1/webhooks/dead").json()
        assert [(d["attempts"], d["last_status"]) for d in dead] == [(3, 503), (1, 400)]
        receiver.status = 200
        (fine,) = _record(srv, 1, start=2)
        wait_for(lambda: len(receiver.acted) == 1, 10)
        assert _acted_ids(receiver) == [fine]  # the dead ones did not hold the queue
        again = c.post(f"/api/v1/webhooks/deliveries/{dead[1]['id']}/retry")
        assert again.status_code == 200 and again.json()["attempts"] == 0
        wait_for(lambda: len(receiver.acted) == 2, 10)
        assert _acted_ids(receiver) == [fine, refused]
        assert c.post(f"/api/v1/webhooks/deliveries/{dead[1]['id']}/retry").status_code == 404
        (target,) = c.get("/api/v1/webhooks").json()
        assert (target["delivered"], target["dead"]) == (2, 1) and "503" in target["last_error"]
    actions = [e["action"] for e in srv.store.audit.entries(0, 1000) if e["target_type"] == "webhook"]
    assert actions == ["webhook.dead_lettered", "webhook.dead_lettered", "webhook.retried"]


def test_no_targets_no_webhooks(server_factory) -> None:
    srv = server_factory()
    _record(srv, 1)
    with srv.client() as c:
        assert c.get("/api/v1/webhooks").json() == []
    assert srv.store.webhooks.counts() == {}
