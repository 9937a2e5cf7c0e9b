#!/usr/bin/env bash
# Jetbridge demo of the whole pipeline on the embedded defaults, every part a separate process on real files:
#   1. the ground makes its CURVE key pair; three devices make theirs and are allowed;
#   2. in flight (no ground), two attendants sell and a handler scans bags, all into each device's file queue;
#   3. after landing, the aggregator starts and the devices sync over ZeroMQ (CURVE on both channels);
#      one device's batch is delivered twice, and the aggregator is killed with SIGKILL mid-sync and restarted;
#   4. the flight report and one passenger's receipt, and the proof that nothing was lost or counted twice.
# Nothing outside DEMO_DIR (a new temporary directory by default) is written. Endpoints: DEMO_DATA, DEMO_ACKS.
# Binaries: those in JETBRIDGE_BIN when it is set; else, in a source checkout, built here (debug); else, as installed
# by a package (/usr/share/jetbridge/demo.sh, the tarball's demo/demo.sh), those installed with it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/capture-functions.sh"
absolute_bin
if [ -z "${JETBRIDGE_BIN:-}" ] && ! [ -f "$here/../Package.swift" ]; then
    JETBRIDGE_BIN=$here/../bin                                         # the tarball: demo/ beside bin/
    [ -x "$JETBRIDGE_BIN/jetbridge-aggregator" ] || JETBRIDGE_BIN=/usr/bin # the Debian package
fi
cd "$here/.."

[ -n "${JETBRIDGE_BIN:-}" ] || install_build_packages

build_products jetbridge-agent jetbridge-aggregator jetbridge-queue

demo=${DEMO_DIR:-$(mktemp -d -t jetbridge-demo.XXXXXX)}
mkdir -p "$demo"
data=${DEMO_DATA:-tcp://127.0.0.1:5560}
acks=${DEMO_ACKS:-tcp://127.0.0.1:5561}
flight="ZA101/2026-11-21"
ground=$demo/ground
server_pid=""
sync_pid=""
# (`|| true`: under `set -e` a kill of a process already gone would end the trap, and the demo, with status 1.)
trap 'for pid in $server_pid $sync_pid; do kill "$pid" 2>/dev/null || true; done' EXIT
echo "== demo directory: $demo"

aggregator() { "$bin/jetbridge-aggregator" --home "$ground" "$@"; }
start_ground() {
    # The binary itself, not a shell function, so that $! is the server's own pid (kill -9 must reach it).
    "$bin/jetbridge-aggregator" --home "$ground" serve --data "$data" --acks "$acks" >> "$demo/aggregator.log" 2>&1 &
    server_pid=$!
    sleep 1
    kill -0 "$server_pid" 2>/dev/null || { echo "the aggregator did not start:"; cat "$demo/aggregator.log"; exit 1; }
}

echo
echo "== 1. keys: the ground's pair, one pair per device, each device allowed by id"
mkdir -p "$ground"
server_key=$(aggregator keys generate)
echo "ground public key: $server_key"
ground_json="{\"data\": \"$data\", \"acks\": \"$acks\", \"serverPublicKey\": \"$server_key\"}"
for device in cart-1 cart-2 gate-1; do
    device_key=$(make_device "$device" "$ground_json")
    aggregator devices allow "$device" -- "$device_key"
done

echo
echo "== 2. in flight, offline: two attendants sell"
sell
agent cart-1 order --seat 17I --item Chips || echo "   (refused, as it should be: there is no seat I; nothing was stored)"

echo "== at the gates, a handler scans 600 bags at departure and, after landing, 597 of them on arrival"
scan_bags
show_queues

echo
echo "== 3. landed: the aggregator starts ($data, $acks), CURVE on, three devices allowed"
start_ground

echo "-- cart-1 syncs; a copy of its queue taken first plays an ack lost on the way: the same batch arrives twice"
cp -a "$demo/cart-1/queue" "$demo/cart-1-queue-before-sync"
agent cart-1 sync --until-drained
rm -rf "$demo/cart-1/queue" && mv "$demo/cart-1-queue-before-sync" "$demo/cart-1/queue"
agent cart-1 sync --until-drained
echo "   (the second delivery counted only duplicates: nothing was stored twice)"

echo "-- cart-2 syncs"
agent cart-2 sync --until-drained

echo "-- gate-1 syncs 1,197 scans; the aggregator is killed with SIGKILL in the middle and restarted"
# The binary itself, not the `agent` function, so that `$!` is the agent's pid (the cleanup kills it by pid).
"$bin/jetbridge-agent" --home "$demo/gate-1" sync --until-drained --timeout 120 > "$demo/gate-1-sync.log" 2>&1 &
sync_pid=$!
for _ in $(seq 1 400); do
    [ "$(acknowledged gate-1)" -gt 0 ] && break
    sleep 0.02
done
kill -9 "$server_pid"
wait "$server_pid" 2>/dev/null || true
echo "   aggregator killed with $(acknowledged gate-1) of 1197 records acknowledged; gate-1 keeps its queue and resends"
sleep 1
start_ground
echo "   aggregator restarted"
wait "$sync_pid"
sync_pid=""
tail -n 1 "$demo/gate-1-sync.log"

echo
echo "== 4. the ground's view"
sleep 2 # receipts are refreshed off the ack path, at most every 2 s
aggregator report flights
echo
aggregator report items
echo
aggregator report devices
echo
echo "-- the receipt of seat 17B (two orders)"
cat "$ground/receipts/ZA101_2026-11-21_17B.txt"

echo
echo "-- checks"
json=$(aggregator report flights --format json | tr -d '\n ')
if [[ $json == *$expected_orders* && $json == *$expected_bags* ]]; then
    echo "PASS: 5 orders (31F at its latest revision), 36.00 USD, 600 bags of which 3 missing: nothing lost, nothing doubled"
else
    echo "FAIL: expected $expected_orders and $expected_bags in: $json"
    exit 1
fi
kill -TERM "$server_pid" && wait "$server_pid" 2>/dev/null || true
server_pid=""
echo "Demo files, logs and the store are in $demo"
