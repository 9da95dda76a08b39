#!/usr/bin/env bash
# Install Debian's Mosquitto (MQTT broker) for the DJI Cloud API telemetry tests and print where it is.
#
#   eval "$(.ci/mosquitto.sh)"      # sets AIRPATROL_TEST_MOSQUITTO
#
# Installs the `mosquitto` package with apt-get when it is missing (needs root), stops the service
# Debian may have started (the server runs its own broker, on its own config and port), checks that
# the broker and mosquitto_passwd run, and prints one `export ...` line on stdout. Everything else
# goes to stderr. Idempotent.
set -euo pipefail

log() { echo "mosquitto.sh: $*" >&2; }

find_programs() {
    MOSQUITTO="$(command -v mosquitto || true)"
    [ -n "${MOSQUITTO}" ] || [ ! -x /usr/sbin/mosquitto ] || MOSQUITTO=/usr/sbin/mosquitto
    PASSWD_TOOL="$(command -v mosquitto_passwd || true)"
}

find_programs
if [ -z "${MOSQUITTO}" ] || [ -z "${PASSWD_TOOL}" ]; then
    [ "$(id -u)" = 0 ] || { log "mosquitto is not installed and this is not root; install it first"; exit 1; }
    command -v apt-get >/dev/null 2>&1 || { log "mosquitto is not installed and there is no apt-get"; exit 1; }
    log "installing mosquitto with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends mosquitto >&2
    find_programs
fi
[ -n "${MOSQUITTO}" ] || { log "no mosquitto after the install"; exit 1; }
[ -n "${PASSWD_TOOL}" ] || { log "no mosquitto_passwd after the install"; exit 1; }
# Debian's service, if its package started one: the tests do not need it
if [ -f /run/mosquitto/mosquitto.pid ]; then
    kill "$(cat /run/mosquitto/mosquitto.pid)" 2>/dev/null || true
fi

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
touch "${tmp}/passwd"
printf 'check\ncheck\n' | "${PASSWD_TOOL}" "${tmp}/passwd" ci >/dev/null 2>&1 \
    || { log "${PASSWD_TOOL} cannot write a password file"; exit 1; }

log "ready: ${MOSQUITTO}"
echo "export AIRPATROL_TEST_MOSQUITTO=${MOSQUITTO}"
