#!/usr/bin/env bash
# Stops the cluster start-throwaway.sh started (named by JETBRIDGE_TEST_POSTGRES_DIR or $1) and removes it.
set -uo pipefail
dir=${1:-${JETBRIDGE_TEST_POSTGRES_DIR:-}}
[ -n "$dir" ] && [ -d "$dir/data" ] || { echo "stop-throwaway: no cluster directory given" >&2; exit 64; }
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
else
    "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
fi
rm -rf "$dir"
