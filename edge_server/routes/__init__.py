"""The HTTP and WebSocket routes of the edge server, one module per resource, each with its own
FastAPI routers: ``public`` (no token: ``/healthz``, WHIP's OPTIONS, the events WebSocket, which
checks its token itself) and ``protected`` (``Depends(require_token)``, the 401 documented).

* :mod:`~edge_server.routes.common` - what the others share: ``ApiError`` and ``json_error`` (the
  API's error body), the bearer token check (``require_token``, ``token_ok``), the store and
  stream manager of a request, how starting and ending a stream answer;
* :mod:`~edge_server.routes.health` - ``/healthz`` and ``/metrics``;
* :mod:`~edge_server.routes.webrtc` - the phone app's offer API and WHIP;
* :mod:`~edge_server.routes.dji_apps` - the stock DJI apps and cameras: RTMP stream keys, RTSP
  pull, operator telemetry, Pilot 2's page and config, nginx's publish callbacks (``router``,
  ``callbacks``, ``pages``);
* :mod:`~edge_server.routes.sessions` - sessions, their viewers and live rules;
* :mod:`~edge_server.routes.height` - a live session's height reference (height above the road);
* :mod:`~edge_server.routes.violations` - violations, the CSV export, snapshots and clips;
* :mod:`~edge_server.routes.live_events` - the live events WebSocket.

The package imports none of its modules: the app (``edge_server.app``) includes their routers
itself, in the order that makes the route table and the OpenAPI document. Who may import it: the
app; ``edge_server.middleware`` and ``edge_server.guides`` import ``common`` only (errors and
the token check); tests. Route modules import ``common`` (and
``dji_apps`` ``health``'s MQTT status), never each other otherwise.
"""

from __future__ import annotations
