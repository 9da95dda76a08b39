#!/usr/bin/env bash
# Install (into .venv) and run the whole test suite. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --dev
# Services some tests need, each set up by a .ci script that prints its environment (an `export`
# line): without it (no root, no apt) those tests skip, except in CI, where this run fails instead.
#   .ci/postgres.sh: installs and starts PostgreSQL on 127.0.0.1 for the store tests;
#   .ci/chromium.sh: installs Debian's chromium and chromedriver for the browser tests (web pages in
#   a real headless browser);
#   .ci/nginx-rtmp.sh: installs Debian's nginx with the RTMP module for the RTMP ingest tests;
#   .ci/mosquitto.sh: installs Debian's Mosquitto (MQTT broker) for the DJI Cloud API telemetry tests;
#   .ci/gst-rtsp.sh: installs Debian's GStreamer RTSP server for the RTSP pull tests;
#   .ci/proj-data.sh: installs Debian's proj-data (the EGM96 geoid grid) for the terrain model's
#   vertical datum tests.
use_service() {  # VARIABLE SCRIPT WHAT (what could not be set up) TESTS (which tests then skip)
  if [ -n "${!1:-}" ] || [ ! -f "$2" ]; then return 0; fi
  local env
  if env=$(bash "$2"); then
    eval "$env"
  elif [ "${CI:-}" = "true" ]; then
    echo "$3 for the $4" >&2
    exit 1
  else
    echo "$3: the $4 will be skipped" >&2
  fi
}
use_service AIRPATROL_TEST_POSTGRES_URL .ci/postgres.sh "PostgreSQL could not be started" "store tests"
use_service AIRPATROL_TEST_CHROMIUM .ci/chromium.sh "chromium could not be installed" "browser tests"
use_service AIRPATROL_TEST_NGINX .ci/nginx-rtmp.sh "nginx with the RTMP module could not be installed" "RTMP ingest tests"
use_service AIRPATROL_TEST_MOSQUITTO .ci/mosquitto.sh "Mosquitto could not be installed" "DJI Cloud API telemetry tests"
use_service AIRPATROL_TEST_RTSP_PYTHON .ci/gst-rtsp.sh "the GStreamer RTSP server could not be installed" "RTSP pull tests"
use_service AIRPATROL_TEST_GEOID .ci/proj-data.sh "proj-data (the EGM96 geoid grid) could not be installed" "vertical datum tests"
[ "$#" -gt 0 ] && exec .venv/bin/python -m pytest -q "$@"  # the tests you name, in one process
# The whole suite in two passes (tests/conftest.py says which test goes where): the tests that may
# share the CPU on every core (pytest-xdist, whole files to a worker; AIRPATROL_TEST_WORKERS, at
# most 4 by default), then the serial ones alone (live streams, servers and browsers, whose timing a
# second test would change).
# Both passes run; the script fails if either did.
status=0
.venv/bin/python -m pytest -q -m "not serial" --dist loadfile \
  --numprocesses "${AIRPATROL_TEST_WORKERS:-logical}" --maxprocesses "${AIRPATROL_TEST_WORKERS:-4}" || status=$?
.venv/bin/python -m pytest -q -m serial || { rc=$?; [ "$status" -ne 0 ] || status=$rc; }
exit "$status"
