"""HTTPS: the server on TLS with a self-signed certificate (what a phone's browser needs to give the
publisher page its camera), the same API and pages over it, plain HTTP refused on its port, and the
DJI apps' RTMP still admitted (nginx's callbacks come over the loopback plain-HTTP listener)."""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest
from edge_helpers import free_port, self_signed_certificate, wait_until
from test_edge_rtmp import NGINX, make_key, needs_nginx, publish, summary

from edge_server.settings import ServerSettings

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed_certificate(tmp_path / "tls")


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ({"tls_certfile": "cert"}, "tls_certfile and tls_keyfile go together"),
        ({"tls_keyfile": "key"}, "tls_certfile and tls_keyfile go together"),
        ({"tls_certfile": "cert", "tls_keyfile": "missing.pem"}, "missing.pem does not exist"),
    ],
)
def test_tls_settings_are_checked(certificate, given: dict, error: str) -> None:
    cert, key = certificate
    files = {"cert": cert, "key": key}
    values = {k: files.get(v, cert.parent / v) for k, v in given.items()}
    with pytest.raises(ValueError, match=error):
        ServerSettings(**values)


def test_the_api_and_pages_over_https(server_factory, certificate) -> None:
    cert, key = certificate
    srv = server_factory(tls_certfile=cert, tls_keyfile=key)
    assert srv.url.startswith("https://")
    with srv.client() as c:  # trusts the server's certificate
        assert c.get("/healthz").json()["status"] == "ok"
        assert c.get("/api/v1/sessions").status_code == 200
        assert "publish-form" in c.get("/console/publish").text
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{srv.url}/healthz")  # a client that does not trust it refuses it
    with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port gets no HTTP answer
        httpx.get(srv.url.replace("https://", "http://") + "/healthz", timeout=5)
    context = ssl.create_default_context(cafile=str(cert))
    with httpx.Client(verify=context) as c:
        assert c.get(f"{srv.url}/guide").status_code == 200


@needs_nginx
def test_rtmp_is_admitted_by_a_server_on_https(server_factory, certificate) -> None:
    cert, key = certificate
    srv = server_factory(
        tls_certfile=cert,
        tls_keyfile=key,
        rtmp_port=free_port(),
        rtmp_host="127.0.0.1",
        warm_pipeline=True,
        nginx_path=NGINX,
    )
    wait_until(lambda: srv.manager.spare.ready, 60, "spare pipeline built")
    wrong = summary(publish(make_key(srv)["url"].replace("/live/", "/live/x"), 2.0))
    assert wrong[0] != 0  # a wrong key is refused through the same callbacks
    key_url = make_key(srv, name="pilot over https")["url"]
    code, result, err = summary(publish(key_url, 4.0))
    assert code == 0, err
    with srv.client() as c:
        session = wait_until(
            lambda: next(iter(c.get("/api/v1/sessions", params={"status": "ended"}).json()["items"]), None),
            30,
            "the RTMP session stored",
        )
    assert session["kind"] == "rtmp" and session["frames_received"] >= result["frames_sent"] - 3, session
