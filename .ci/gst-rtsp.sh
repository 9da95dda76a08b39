#!/usr/bin/env bash
# Install Debian's GStreamer RTSP server (with the Python bindings) for the RTSP pull tests and print
# the Python that runs tests/edge_server/servers/rtsp_server.py.
#
#   eval "$(.ci/gst-rtsp.sh)"      # sets AIRPATROL_TEST_RTSP_PYTHON
#
# Installs python3-gi, gir1.2-gst-rtsp-server-1.0, gstreamer1.0-plugins-good (qtdemux, rtph264pay) and
# gstreamer1.0-plugins-bad (h264parse) with apt-get when they are missing (needs root), checks that
# Debian's python3 loads them, and prints one `export ...` line on stdout. Everything else goes to
# stderr. Idempotent.
set -euo pipefail

log() { echo "gst-rtsp.sh: $*" >&2; }
PY=/usr/bin/python3
CHECK='import gi; gi.require_version("Gst", "1.0"); gi.require_version("GstRtspServer", "1.0")
from gi.repository import Gst, GstRtspServer
Gst.init(None)
missing = [e for e in ("qtdemux", "h264parse", "rtph264pay") if Gst.ElementFactory.find(e) is None]
assert not missing, missing'

if ! "${PY}" -c "${CHECK}" >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || { log "the GStreamer RTSP server is not installed and this is not root; install it first"; exit 1; }
    command -v apt-get >/dev/null 2>&1 || { log "the GStreamer RTSP server is not installed and there is no apt-get"; exit 1; }
    log "installing the GStreamer RTSP server with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends python3-gi gir1.2-gst-rtsp-server-1.0 \
        gstreamer1.0-plugins-good gstreamer1.0-plugins-bad >&2
fi
"${PY}" -c "${CHECK}" >&2 || { log "${PY} cannot load GstRtspServer and the H.264 elements"; exit 1; }

log "ready: ${PY} with GstRtspServer"
echo "export AIRPATROL_TEST_RTSP_PYTHON=${PY}"
