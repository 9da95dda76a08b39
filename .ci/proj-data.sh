#!/usr/bin/env bash
# Install Debian's proj-data (PROJ's grids: the EGM96 geoid, egm96_15.gtx) for the terrain model's
# vertical datum tests and print where it is.
#
#   eval "$(.ci/proj-data.sh)"      # sets AIRPATROL_TEST_GEOID
#
# Installs the `proj-data` package with apt-get when the grid is missing (needs root) and prints one
# `export ...` line on stdout. Everything else goes to stderr. Idempotent. pipelines.terrain_io adds
# /usr/share/proj to pyproj's search path when it exists.
set -euo pipefail

log() { echo "proj-data.sh: $*" >&2; }

GRID=/usr/share/proj/egm96_15.gtx
if [ ! -f "${GRID}" ]; then
    [ "$(id -u)" = 0 ] || { log "proj-data is not installed and this is not root; install it first"; exit 1; }
    command -v apt-get >/dev/null 2>&1 || { log "proj-data is not installed and there is no apt-get"; exit 1; }
    log "installing proj-data with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends proj-data >&2
fi
[ -f "${GRID}" ] || { log "no ${GRID} after the install"; exit 1; }
log "ready: ${GRID}"
echo "export AIRPATROL_TEST_GEOID=${GRID}"
