"""A real RTSP server for the RTSP pull tests: GStreamer's gst-rtsp-server (Debian:
gir1.2-gst-rtsp-server-1.0, python3-gi, gstreamer1.0-plugins-good and -bad; .ci/gst-rtsp.sh)
serving an H.264 MP4 at rtsp://127.0.0.1:PORT/flight, in real time, to every client from its start.

Run by Debian's own python3 (its `gi` bindings), not the project's venv:

    /usr/bin/python3 tests/edge_server/servers/rtsp_server.py PORT VIDEO.mp4

Prints "ready" once it listens; runs until killed.
"""

import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

Gst.init(None)
port, video = sys.argv[1], sys.argv[2]
server = GstRtspServer.RTSPServer()
server.set_address("127.0.0.1")
server.set_service(port)
factory = GstRtspServer.RTSPMediaFactory()
factory.set_launch(
    f'( filesrc location="{video}" ! qtdemux ! h264parse ! rtph264pay name=pay0 pt=96 config-interval=1 )'
)
factory.set_shared(False)  # each client gets the file from its start
server.get_mount_points().add_factory("/flight", factory)
if server.attach(None) == 0:
    sys.exit(f"cannot listen on 127.0.0.1:{port}")
print("ready", flush=True)
GLib.MainLoop().run()
