#!/usr/bin/env bash
# Install Debian's nginx with the RTMP module for the RTMP ingest tests and print where nginx is.
#
#   eval "$(.ci/nginx-rtmp.sh)"      # sets AIRPATROL_TEST_NGINX
#
# Installs `nginx-light` and `libnginx-mod-rtmp` with apt-get when either is missing (needs root),
# keeps Debian's own nginx service from running (the server starts nginx itself, on its own
# config and ports), checks that nginx loads the module, and prints one `export ...` line on
# stdout. Everything else goes to stderr. Idempotent.
set -euo pipefail

log() { echo "nginx-rtmp.sh: $*" >&2; }
MODULE=/usr/lib/nginx/modules/ngx_rtmp_module.so

NGINX="$(command -v nginx || true)"
[ -n "${NGINX}" ] || [ ! -x /usr/sbin/nginx ] || NGINX=/usr/sbin/nginx
if [ -z "${NGINX}" ] || [ ! -f "${MODULE}" ]; then
    [ "$(id -u)" = 0 ] || { log "nginx or its RTMP module is not installed and this is not root; install them first"; exit 1; }
    command -v apt-get >/dev/null 2>&1 || { log "nginx is not installed and there is no apt-get"; exit 1; }
    log "installing nginx-light and libnginx-mod-rtmp with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends nginx-light libnginx-mod-rtmp >&2
    NGINX=/usr/sbin/nginx
fi
# Debian's package may have started its service on port 80: the tests do not need it
if [ -f /run/nginx.pid ]; then
    "${NGINX}" -s quit >&2 2>/dev/null || true
fi

# nginx must accept a config that loads the module (a broken install fails here, not in the tests)
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
printf 'load_module %s;\npid %s/nginx.pid;\nerror_log stderr;\nevents {}\nrtmp { server { listen 127.0.0.1:1; application live { live on; } } }\n' \
    "${MODULE}" "${tmp}" > "${tmp}/nginx.conf"
"${NGINX}" -t -q -c "${tmp}/nginx.conf" -p "${tmp}" >&2 || { log "nginx cannot load ${MODULE}"; exit 1; }

log "ready: ${NGINX} with ${MODULE}"
echo "export AIRPATROL_TEST_NGINX=${NGINX}"
