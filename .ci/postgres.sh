#!/usr/bin/env bash
# Install PostgreSQL from Debian's packages when it is missing, start it, and make the role
# and database the ledger tests use (the default of ANYCLOUD_TEST_POSTGRES_URL):
#   postgresql+psycopg://anycloud:anycloud@127.0.0.1:5432/anycloud_test
# Idempotent; needs root (or sudo) for the install and start.
set -euo pipefail

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }

if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "installing PostgreSQL from Debian's packages" >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi

version="$(ls /etc/postgresql | sort -V | tail -n 1)"
if [ -z "$version" ]; then
  as_root pg_createcluster "$(ls /usr/lib/postgresql | sort -V | tail -n 1)" main
  version="$(ls /etc/postgresql | sort -V | tail -n 1)"
fi
if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -h 127.0.0.1 -p 5432 >&2

# Under CI=true (.ci/run) the server is a throw-away one: no fsync of each commit. No test
# crashes PostgreSQL itself (they kill anycloud's processes), so no answer the ledger gives
# changes, only the time (the PostgreSQL variants of test_credentials.py and test_clusters.py
# took 20 s instead of 30 s). A developer's own server is left as it is.
if [ "${CI:-}" = true ]; then
  as_postgres psql -q -v ON_ERROR_STOP=1 \
    -c "ALTER SYSTEM SET fsync = off" -c "ALTER SYSTEM SET synchronous_commit = off" \
    -c "ALTER SYSTEM SET full_page_writes = off" -c "SELECT pg_reload_conf()" >/dev/null
fi

as_postgres psql -q -v ON_ERROR_STOP=1 <<'SQL'
SELECT 'CREATE ROLE anycloud LOGIN PASSWORD ''anycloud'''
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'anycloud') \gexec
SELECT 'CREATE DATABASE anycloud_test OWNER anycloud'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'anycloud_test') \gexec
SQL
