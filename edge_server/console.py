"""The operator console: a small browser app served by the server itself at ``/console``.

Plain ES modules and one style sheet (``edge_server/console_assets/``, package data, in the wheel): no CDN,
no build step, nothing fetched from outside, since an edge box is often offline. The page is public
and holds no data; everything it shows comes from the token-protected API, with the token the
operator enters (kept in the tab's sessionStorage, sent as ``Authorization: Bearer``; the events
WebSocket takes it as ``?token=``). Snapshots and clips are fetched with the token and shown from
blob URLs, so no media URL ever carries it.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

ASSETS = Path(__file__).resolve().parent / "console_assets"
ASSETS_PATH = "/console/assets"

# Scripts and styles only from here; media from blob: URLs made of API responses; the events
# WebSocket on this origin; never framed (click-jacking of the false-positive toggle). Revalidated
# (ETag) at every load, so an upgraded server never runs an old script.
HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "
        "media-src 'self' blob:; connect-src 'self' ws: wss:; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_RAW_HEADERS = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]


class ConsoleAssets(StaticFiles):
    """The console's files with the console's headers."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *_RAW_HEADERS]}
            await send(message)

        await super().__call__(scope, receive, send_with_headers)


router = APIRouter(include_in_schema=False)


@router.get("/console")
async def console_root() -> RedirectResponse:
    return RedirectResponse("/console/", status_code=308)


@router.get("/console/")
async def console_page() -> FileResponse:
    return FileResponse(ASSETS / "index.html", headers=HEADERS)


@router.get("/console/publish")
async def publisher_page() -> FileResponse:
    """The phone-browser publisher: the device's camera over WHIP with the operator's flight values."""
    return FileResponse(ASSETS / "publish.html", headers=HEADERS)


@router.get("/console/alert")
async def alert_page() -> FileResponse:
    """The stop team's phone page: each new enforceable violation with its picture, direction and
    the next checkpoint's ETA, as it is stored (the events WebSocket)."""
    return FileResponse(ASSETS / "alert.html", headers=HEADERS)


def mount_console(app) -> None:
    app.mount(ASSETS_PATH, ConsoleAssets(directory=str(ASSETS)), name="console-assets")
