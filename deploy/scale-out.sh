#!/usr/bin/env bash
# Jetbridge scale-out demo on one machine: two aggregators share one PostgreSQL store, and one of them dies mid-sync.
#   1. a throwaway PostgreSQL cluster (Debian's postgresql package; initdb as an unprivileged user in a temporary
#      directory, on a free loopback port); the schema is applied once with `store migrate`;
#   2. two aggregators (`serve --store postgres://…`), each with its own home, CURVE key pair and endpoints; three
#      devices, each allowed on both, list both aggregators in `ground`;
#   3. in flight (no ground), two attendants sell and a handler scans bags, all into each device's file queue;
#   4. after landing, the three devices sync at once, spreading batches over both aggregators; aggregator A is killed
#      with SIGKILL mid-sync and NOT restarted: the devices resend what A never acknowledged to B and finish there;
#   5. the flight report and a receipt read from the shared store by any host, and the proof that nothing was lost or
#      counted twice: a last line starting `PASS:` or `FAIL:`.
# Nothing outside DEMO_DIR (a new temporary directory by default) is written; the cluster is stopped and removed on
# exit. Endpoints: 127.0.0.1 ports SCALE_OUT_PORT … +3 (default 5570). Binaries: those in JETBRIDGE_BIN when it is
# set, else built here (debug).
set -euo pipefail
source "$(dirname "$0")/capture-functions.sh"
absolute_bin
cd "$(dirname "$0")/.."
root=$PWD

sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
[ -n "${JETBRIDGE_BIN:-}" ] || install_build_packages
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
if ! [ -x "$PG_BIN/initdb" ]; then
    echo "== installing PostgreSQL (Debian package postgresql; only its binaries are used, in a throwaway cluster)"
    $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq postgresql >/dev/null
fi
# Tests/postgres/start-throwaway.sh picks its free port with Python.
command -v python3 >/dev/null || { $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq python3 >/dev/null; }

build_products jetbridge-agent jetbridge-aggregator

demo=${DEMO_DIR:-$(mktemp -d -t jetbridge-scale-out.XXXXXX)}
mkdir -p "$demo"
port=${SCALE_OUT_PORT:-5570}
flight="ZA202/2026-11-25"
pg_dir=""
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    [ -n "$pg_dir" ] && "$root/Tests/postgres/stop-throwaway.sh" "$pg_dir" 2>/dev/null || true
}
trap cleanup EXIT
echo "== demo directory: $demo"

echo
echo "== 1. a throwaway PostgreSQL cluster, and the schema"
pg_env=$("$root/Tests/postgres/start-throwaway.sh")
eval "$pg_env"
pg_dir=$JETBRIDGE_TEST_POSTGRES_DIR
store=$JETBRIDGE_TEST_POSTGRES
echo "store: $store (cluster in $pg_dir)"
"$bin/jetbridge-aggregator" --home "$demo/ground-a" store migrate --store "$store"

aggregator_endpoints

echo
echo "== 2. keys: each aggregator's pair, one pair per device, each device allowed on both aggregators"
allow_devices_on_both

echo
echo "== 3. in flight, offline: two attendants sell, a handler scans 600 bags out and 597 in"
sell >/dev/null
scan_bags >/dev/null
show_queues

echo
echo "== 4. landed: both aggregators start on the shared store; the three devices sync at once"
start_both_and_sync
kill -9 "$pid_a"
wait "$pid_a" 2>/dev/null || true
forget_pid "$pid_a"
echo "-- aggregator A killed with SIGKILL with $(acknowledged gate-1) of 1197 gate-1 records acknowledged; not restarted"
failed=0
for i in "${!sync_pids[@]}"; do
    wait "${sync_pids[$i]}" || failed=1
    forget_pid "${sync_pids[$i]}"
done
for device in cart-1 cart-2 gate-1; do
    echo "   $device: $(tail -n 1 "$demo/$device-sync.log")"
done

echo
echo "== 5. the ground's view, from the shared store (any host can read it)"
aggregator b report flights --store "$store"
echo
aggregator b report devices --store "$store"
echo
echo "-- the receipt of seat 17B (two orders), rendered from the shared store"
aggregator b receipts rebuild --store "$store" >/dev/null
cat "$demo/ground-b/receipts/ZA202_2026-11-25_17B.txt"

echo
echo "-- checks"
json=$(aggregator b report flights --store "$store" --format json | tr -d '\n ')
kill -TERM "$pid_b" 2>/dev/null && wait "$pid_b" 2>/dev/null || true
forget_pid "$pid_b"
if [ "$failed" = 0 ] && [[ $json == *$expected_orders* && $json == *$expected_bags* ]]; then
    echo "PASS: 5 orders (31F at its latest revision), 36.00 USD, 600 bags of which 3 missing, through two aggregators with one killed mid-sync: nothing lost, nothing doubled"
else
    echo "FAIL: every sync drained: $([ "$failed" = 0 ] && echo yes || echo no); expected $expected_orders and $expected_bags in: $json"
    exit 1
fi
echo "Demo files and logs are in $demo (the PostgreSQL cluster is removed on exit)"
