#!/usr/bin/env bash
# Installs and starts what the test suite needs beside Python: a PostgreSQL server on loopback and
# Debian's Chromium. Idempotent; safe to run before every test run.
set -euo pipefail

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

missing=()
command -v pg_ctlcluster >/dev/null 2>&1 || missing+=(postgresql)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
if ! pg_lsclusters -h | grep -q "^${version} *main"; then
  $SUDO pg_createcluster "$version" main >/dev/null
fi
if ! pg_lsclusters -h | awk -v v="$version" '$1==v && $2=="main" {print $4}' | grep -q online; then
  $SUDO pg_ctlcluster "$version" main start
fi
for _ in $(seq 1 30); do
  pg_isready -q -h 127.0.0.1 -p 5432 && break
  sleep 1
done

# A role that may create the per-test databases; password auth over TCP on loopback.
$SUDO su postgres -c "psql -q -v ON_ERROR_STOP=1" <<'SQL'
DO $$
BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'drafters') THEN
    CREATE ROLE drafters LOGIN PASSWORD 'drafters' CREATEDB CREATEROLE;
  END IF;
END $$;
SQL
echo "services: postgresql $version on 127.0.0.1:5432, chromium $(command -v chromium)"
