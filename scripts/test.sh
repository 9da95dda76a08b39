#!/usr/bin/env bash
# Install (into .venv) and run the whole test suite. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --dev
# The store tests also run against a real PostgreSQL; .ci/postgres.sh installs and starts one
# on 127.0.0.1 and prints the URL. Without it (no root, no apt) those cases skip, except in CI.
if [ -z "${AIRPATROL_TEST_POSTGRES_URL:-}" ] && [ -f .ci/postgres.sh ]; then
  if pg_env=$(bash .ci/postgres.sh); then
    eval "$pg_env"
  elif [ "${CI:-}" = "true" ]; then
    echo "PostgreSQL could not be started for the store tests" >&2
    exit 1
  else
    echo "PostgreSQL could not be started: its store tests will be skipped" >&2
  fi
fi
# The browser tests (web pages in a real headless browser) use Debian's chromium and chromedriver;
# .ci/chromium.sh installs them with apt and prints their paths. Without them (no root, no apt)
# those tests skip, except in CI.
if [ -z "${AIRPATROL_TEST_CHROMIUM:-}" ] && [ -f .ci/chromium.sh ]; then
  if chromium_env=$(bash .ci/chromium.sh); then
    eval "$chromium_env"
  elif [ "${CI:-}" = "true" ]; then
    echo "chromium could not be installed for the browser tests" >&2
    exit 1
  else
    echo "chromium could not be installed: the browser tests will be skipped" >&2
  fi
fi
exec .venv/bin/python -m pytest -q "$@"
