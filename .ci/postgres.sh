#!/usr/bin/env bash
# Start a local PostgreSQL for the store tests and print the URL to use.
#
#   eval "$(.ci/postgres.sh)"      # sets AIRPATROL_TEST_POSTGRES_URL
#
# Installs PostgreSQL with apt when it is missing (needs root), starts a cluster listening on
# 127.0.0.1 only (Debian's pg_ctlcluster runs the server as the postgres user, so this is safe
# as root; without the Debian wrappers it falls back to initdb + pg_ctl as postgres), creates a
# role and a database, and prints one `export ...` line on stdout. Everything else goes to stderr.
# Idempotent: running it again reuses the cluster, role and database.
set -euo pipefail

PG_DB="${AIRPATROL_PG_DB:-airpatrol_test}"
PG_USER="${AIRPATROL_PG_USER:-airpatrol}"
PG_PASSWORD="${AIRPATROL_PG_PASSWORD:-airpatrol}"
PG_PORT="${AIRPATROL_PG_PORT:-5432}"
PG_CLUSTER="${AIRPATROL_PG_CLUSTER:-main}"

log() { echo "postgres.sh: $*" >&2; }

as_postgres() {
    if [ "$(id -un)" = postgres ]; then "$@"; else su postgres -s /bin/sh -c "$(printf '%q ' "$@")"; fi
}

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || { log "PostgreSQL is not installed and this is not root; install it first"; exit 1; }
    log "installing PostgreSQL with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
fi

PG_VERSION="$(ls /usr/lib/postgresql | sort -V | tail -1)"
PG_BIN="/usr/lib/postgresql/${PG_VERSION}/bin"

if command -v pg_ctlcluster >/dev/null 2>&1; then
    if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "${PG_VERSION} ${PG_CLUSTER}"; then
        log "creating cluster ${PG_VERSION}/${PG_CLUSTER} on port ${PG_PORT}"
        pg_createcluster "${PG_VERSION}" "${PG_CLUSTER}" --port "${PG_PORT}" >&2
    fi
    PG_PORT="$(pg_lsclusters -h | awk -v v="${PG_VERSION}" -v c="${PG_CLUSTER}" '$1==v && $2==c {print $3}')"
    if ! pg_lsclusters -h | awk -v v="${PG_VERSION}" -v c="${PG_CLUSTER}" '$1==v && $2==c {print $4}' | grep -q online; then
        log "starting cluster ${PG_VERSION}/${PG_CLUSTER} (port ${PG_PORT}, 127.0.0.1 only)"
        pg_ctlcluster "${PG_VERSION}" "${PG_CLUSTER}" start -- -o "-c listen_addresses=127.0.0.1" >&2 \
            || pg_ctlcluster "${PG_VERSION}" "${PG_CLUSTER}" start >&2
    fi
else
    PGDATA="${AIRPATROL_PGDATA:-/var/lib/postgresql/airpatrol-ci}"
    if [ ! -s "${PGDATA}/PG_VERSION" ]; then
        log "initdb ${PGDATA}"
        mkdir -p "${PGDATA}" && chown postgres "${PGDATA}" 2>/dev/null || true
        as_postgres "${PG_BIN}/initdb" -D "${PGDATA}" -A scram-sha-256 --pwfile=<(echo postgres) >&2 \
            || as_postgres "${PG_BIN}/initdb" -D "${PGDATA}" -A trust >&2
    fi
    if ! as_postgres "${PG_BIN}/pg_ctl" -D "${PGDATA}" status >/dev/null 2>&1; then
        as_postgres "${PG_BIN}/pg_ctl" -D "${PGDATA}" -w -l "${PGDATA}/server.log" \
            -o "-c listen_addresses=127.0.0.1 -p ${PG_PORT} -k /tmp" start >&2
    fi
fi

for _ in $(seq 1 30); do
    "${PG_BIN}/pg_isready" -q -h 127.0.0.1 -p "${PG_PORT}" && break
    sleep 1
done
"${PG_BIN}/pg_isready" -h 127.0.0.1 -p "${PG_PORT}" >&2 || { log "server did not come up"; exit 1; }

psql_admin() {
    # Local socket as the postgres superuser (peer auth); /tmp for the initdb fallback.
    as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "${PG_PORT}" -h "${PGHOST_SOCKET:-/var/run/postgresql}" "$@" 2>/dev/null \
        || as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "${PG_PORT}" -h /tmp "$@"
}

psql_admin -d postgres >&2 <<SQL
DO \$\$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${PG_USER}') THEN
        CREATE ROLE ${PG_USER} LOGIN PASSWORD '${PG_PASSWORD}';
    ELSE
        ALTER ROLE ${PG_USER} LOGIN PASSWORD '${PG_PASSWORD}';
    END IF;
END
\$\$;
SQL
if ! psql_admin -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '${PG_DB}'" | grep -q 1; then
    psql_admin -d postgres -c "CREATE DATABASE ${PG_DB} OWNER ${PG_USER}" >&2
fi

URL="postgresql+psycopg2://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${PG_PORT}/${PG_DB}"
PGPASSWORD="${PG_PASSWORD}" psql -X -q -h 127.0.0.1 -p "${PG_PORT}" -U "${PG_USER}" -d "${PG_DB}" -c "SELECT 1" >/dev/null \
    || { log "cannot log in as ${PG_USER} over TCP"; exit 1; }
log "ready: ${PG_DB} on 127.0.0.1:${PG_PORT}"
echo "export AIRPATROL_TEST_POSTGRES_URL=${URL}"
