#!/usr/bin/env bash
# Install Debian's chromium and chromedriver for the browser tests and print where they are.
#
#   eval "$(.ci/chromium.sh)"      # sets AIRPATROL_TEST_CHROMIUM and AIRPATROL_TEST_CHROMEDRIVER
#
# Installs the `chromium` and `chromium-driver` packages with apt-get when either program is
# missing (needs root), checks that both run, and prints one `export ...` line on stdout.
# Everything else goes to stderr. Idempotent: when both are installed it only looks them up.
set -euo pipefail

log() { echo "chromium.sh: $*" >&2; }

find_programs() {
    CHROMIUM="$(command -v chromium || true)"
    CHROMEDRIVER="$(command -v chromedriver || true)"
}

find_programs
if [ -z "${CHROMIUM}" ] || [ -z "${CHROMEDRIVER}" ]; then
    [ "$(id -u)" = 0 ] || { log "chromium/chromedriver are not installed and this is not root; install them first"; exit 1; }
    command -v apt-get >/dev/null 2>&1 || { log "chromium/chromedriver are not installed and there is no apt-get"; exit 1; }
    log "installing chromium and chromium-driver with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2
    find_programs
fi
[ -n "${CHROMIUM}" ] || { log "no chromium on PATH after the install"; exit 1; }
[ -n "${CHROMEDRIVER}" ] || { log "no chromedriver on PATH after the install"; exit 1; }

# Both must start (a broken install, or missing shared libraries, fails here rather than in the tests).
# Debian's launcher may print "[: ...: unexpected operator" where findmnt lists /dev/shm twice (its
# /etc/chromium.d/dev-shm check): harmless, the tests pass --disable-dev-shm-usage themselves.
"${CHROMIUM}" --version >&2 || { log "${CHROMIUM} --version failed"; exit 1; }
"${CHROMEDRIVER}" --version >&2 || { log "${CHROMEDRIVER} --version failed"; exit 1; }

log "ready: ${CHROMIUM}, ${CHROMEDRIVER}"
echo "export AIRPATROL_TEST_CHROMIUM=${CHROMIUM} AIRPATROL_TEST_CHROMEDRIVER=${CHROMEDRIVER}"
