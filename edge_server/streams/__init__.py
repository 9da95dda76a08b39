"""The live streams: one :class:`StreamSession` per publishing drone or camera, kept by the registry
:class:`StreamManager`, on the media loop (:mod:`edge_server.media_loop`).

* :mod:`~edge_server.streams.registry` - ``StreamManager``: admit, start, find and end streams; it
  owns the pieces below and is, with ``spare``, the only module here that reaches the engine
  (``edge_server.worker``);
* one module per way a stream arrives: :mod:`~edge_server.streams.webrtc_ingest` (WebRTC: the
  phone API and WHIP), :mod:`~edge_server.streams.pull_ingest` (pulled: RTSP, and the reader RTMP
  uses), :mod:`~edge_server.streams.rtmp_ingest` (RTMP publishers by stream key, through nginx);
* :mod:`~edge_server.streams.viewers` - the annotated video to the console's viewers;
  :mod:`~edge_server.streams.telemetry_routing` - telemetry (data channel, DJI OSD) into the
  streams, events out to their publishers; :mod:`~edge_server.streams.spare` - the pipeline built
  ahead for the next stream;
* what they share: :mod:`~edge_server.streams.session` (the session, the operator's values),
  :mod:`~edge_server.streams.errors` (why a stream cannot start), :mod:`~edge_server.streams.peers`
  (SDP checks, peer connections, the return video track), :mod:`~edge_server.streams.host` (the
  registry as the ingest modules see it), :mod:`~edge_server.streams.memory` (memory admission: a
  new stream refused rather than the box swapping).

Ingest modules hand frames to a stream's engine only through :mod:`edge_server.engine_link`
(``StreamEngine.submit(IncomingFrame)``; the engine reaches back through the session): they
import neither :mod:`pipelines` nor the worker nor the registry
(tests/edge_server/test_edge_streams_layering.py).

Who may import this package: the web app (``edge_server.app``, the route modules of
``edge_server.routes``) and tests; no other module of ``edge_server`` imports it.
"""

from __future__ import annotations

from edge_server.streams.errors import CapacityError, KeyBusy, OfferError, PipelineUnavailable
from edge_server.streams.peers import check_offer_sdp
from edge_server.streams.registry import StreamManager
from edge_server.streams.session import (
    OPERATOR_FIELDS,
    RtmpKeyRef,
    StreamSession,
    operator_fields,
    with_operator_values,
)

__all__ = [
    "OPERATOR_FIELDS",
    "CapacityError",
    "KeyBusy",
    "OfferError",
    "PipelineUnavailable",
    "RtmpKeyRef",
    "StreamManager",
    "StreamSession",
    "check_offer_sdp",
    "operator_fields",
    "with_operator_values",
]
