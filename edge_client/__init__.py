"""The client side and tooling of the AirPatrol edge server.

* :mod:`edge_client.publish` - the reference publisher (``airpatrol publish``): streams a recorded
  flight to a server over WebRTC, as the phone app on a pilot's laptop or phone would;
* :mod:`edge_client.tracks` - its video: sources checked up front, and the real-time WebRTC tracks;
* :mod:`edge_client.synthetic` - a synthetic test source: the scene, its H.264 video and DJI SRT
  sidecar, and :class:`~edge_client.synthetic.BrightBlobDetector`, a model-free detector for it;
* :mod:`edge_client.bench` - the server benchmark (``airpatrol serve-bench``), with its server
  subprocess (``bench_server``), stream runs (``bench_runs``, ``bench_api_load``) and report
  (``bench_report``).

None of this runs inside the server. It talks to a server only over HTTP and WebRTC, and may
import :mod:`pipelines` and the server's wire formats (``edge_server.schemas``, the telemetry
message of ``edge_server.telemetry``, the ICE helper ``edge_server.ice``), never the server's
internals (store, streams, worker, api).
"""
