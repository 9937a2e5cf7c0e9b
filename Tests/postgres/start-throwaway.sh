#!/usr/bin/env bash
# Starts a throwaway PostgreSQL cluster for the tests that need one, and prints the shell lines that use it.
#
#   eval "$(Tests/postgres/start-throwaway.sh)"      # exports JETBRIDGE_TEST_POSTGRES and JETBRIDGE_TEST_POSTGRES_DIR
#   swift test --filter 'Postgres|SharedStore|StoreParity|SeveralAggregators|PeerChurn|FlightLimit|LimitQueryPlan|ProofOfDelivery|ConsoleStore|Receipt|FleetView|FlightBags'   # the suites that use it
#   Tests/postgres/stop-throwaway.sh                 # or: pg_ctl -D "$JETBRIDGE_TEST_POSTGRES_DIR" stop
#
# The cluster lives in a new temporary directory, listens on a free loopback port (and a socket in that directory),
# trusts local connections and holds one database, jetbridge_test. PostgreSQL refuses to run as root: as root the
# server runs as the `postgres` user (runuser); as anyone else it runs as that user. Debian's PostgreSQL 15 is used
# unless PG_BIN names another bin directory.
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
[ -x "$PG_BIN/initdb" ] || { echo "start-throwaway: no initdb in $PG_BIN (apt-get install postgresql)" >&2; exit 69; }

as_server() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

dir=$(mktemp -d /tmp/jetbridge-pg.XXXXXX)
chmod 0755 "$dir"
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
# A free port: ask the kernel for one, then let the server bind it (a race with another process is unlikely and
# makes pg_ctl fail loudly).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

as_server "$PG_BIN/initdb" -D "$dir/data" -A trust -U postgres --no-sync -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
# Throwaway: no fsync (nothing here must survive a power cut), and room for parallel tests.
as_server "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
as_server "$PG_BIN/createdb" -h "$dir" -p "$port" -U postgres jetbridge_test || {
    # The caller never learns the directory of a cluster this script could not finish: stop and remove it here.
    as_server "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1
    rm -rf "$dir"
    exit 1
}

echo "export JETBRIDGE_TEST_POSTGRES=postgres://postgres@127.0.0.1:$port/jetbridge_test"
echo "export JETBRIDGE_TEST_POSTGRES_DIR=$dir"
