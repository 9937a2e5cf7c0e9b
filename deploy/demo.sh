#!/usr/bin/env bash
# Jetbridge demo of the whole pipeline on the embedded defaults, every part a separate process on real files:
#   1. the ground makes its CURVE key pair; three devices make theirs and are allowed;
#   2. in flight (no ground), two attendants sell and a handler scans bags, all into each device's file queue;
#   3. after landing, the aggregator starts and the devices sync over ZeroMQ (CURVE on both channels);
#      one device's batch is delivered twice, and the aggregator is killed with SIGKILL mid-sync and restarted;
#   4. the flight report and one passenger's receipt, and the proof that nothing was lost or counted twice.
# Nothing outside DEMO_DIR (a new temporary directory by default) is written. Endpoints: DEMO_DATA, DEMO_ACKS.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if ! [ -e /usr/include/zmq.h ]; then
    echo "== installing libzmq and SQLite headers (Debian packages libzmq3-dev, libsqlite3-dev)"
    sudo_cmd=""
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq libzmq3-dev libsqlite3-dev >/dev/null
fi

echo "== building (debug; the first build takes a few minutes)"
for product in jetbridge-agent jetbridge-aggregator jetbridge-queue; do
    swift build --product "$product" >/dev/null
done
bin=$(swift build --show-bin-path)

demo=${DEMO_DIR:-$(mktemp -d -t jetbridge-demo.XXXXXX)}
mkdir -p "$demo"
data=${DEMO_DATA:-tcp://127.0.0.1:5560}
acks=${DEMO_ACKS:-tcp://127.0.0.1:5561}
flight="ZA101/2026-11-21"
ground=$demo/ground
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; true' EXIT
echo "== demo directory: $demo"

aggregator() { "$bin/jetbridge-aggregator" --home "$ground" "$@"; }
agent() { # agent DEVICE ARGS...: the device's agent, with its own home
    local device=$1
    shift
    "$bin/jetbridge-agent" --home "$demo/$device" "$@"
}
uuid() { tr a-f A-F < /proc/sys/kernel/random/uuid; }
start_ground() {
    # The binary itself, not a shell function, so that $! is the server's own pid (kill -9 must reach it).
    "$bin/jetbridge-aggregator" --home "$ground" serve --data "$data" --acks "$acks" >> "$demo/aggregator.log" 2>&1 &
    server_pid=$!
    sleep 1
    kill -0 "$server_pid" 2>/dev/null || { echo "the aggregator did not start:"; cat "$demo/aggregator.log"; exit 1; }
}
acknowledged() { agent "$1" status --json | tr -d '\n ' | sed -E 's/.*"acknowledgedThrough":([0-9]+).*/\1/'; }

echo
echo "== 1. keys: the ground's pair, one pair per device, each device allowed by id"
mkdir -p "$ground"
server_key=$(aggregator keys generate)
echo "ground public key: $server_key"
for device in cart-1 cart-2 gate-1; do
    mkdir -p "$demo/$device"
    # gate-1 sends small batches one at a time, so the sync takes long enough to kill the aggregator during it.
    batch=100 window=8
    [ "$device" = gate-1 ] && batch=10 window=1
    cat > "$demo/$device/agent.json" <<JSON
{"device": "$device", "flight": "$flight",
 "ground": {"data": "$data", "acks": "$acks", "serverPublicKey": "$server_key"},
 "sync": {"batchRecords": $batch, "window": $window}}
JSON
    device_key=$(agent "$device" keys generate | sed -n 's/^public key *//p')
    aggregator devices allow "$device" -- "$device_key"
done

echo
echo "== 2. in flight, offline: two attendants sell"
agent cart-1 order --seat 17B --item Peanuts=2 --item Chips
agent cart-1 order --seat 17C --item Popcorn
agent cart-1 order --seat 17B --item Popcorn=2
agent cart-2 order --seat 30A --item Chips=3
id=$(agent cart-2 order --seat 31F --item Peanuts --json | tr -d '\n' | sed -E 's/.*"id" *: *"([^"]+)".*/\1/')
echo "   (the passenger in 31F changes the order: same id, revision 2)"
agent cart-2 order --amend "$id" --item Peanuts=2 --item Popcorn
agent cart-1 order --seat 17I --item Chips || echo "   (refused, as it should be: there is no seat I; nothing was stored)"

echo "== at the gates, a handler scans 600 bags at departure and, after landing, 597 of them on arrival"
tags=$demo/tags.txt
: > "$tags"
initials=(A B C D E F G H)
families=(SMI JON LEE KIM ZMU NGU BAR OKA)
for i in $(seq 1 600); do
    printf '{"id": "%s", "owner": ["%s", "%s"], "weight": %d.5}\n' \
        "$(uuid)" "${initials[i % 8]}" "${families[i % 8]}" $((20 + i % 30)) >> "$tags"
done
agent gate-1 scan --at origin < "$tags"
head -n 597 "$tags" | agent gate-1 scan --at destination
for device in cart-1 cart-2 gate-1; do
    printf '   %-7s %s\n' "$device" "$(agent "$device" status | grep -E '^unacknowledged')"
done

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
agent gate-1 sync --until-drained --timeout 120 > "$demo/gate-1-sync.log" 2>&1 &
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
expect='"orders":5,"revenue":3600'
bags='"checked":600,"departed":600,"arrived":597,"missing":3'
if [[ $json == *$expect* && $json == *$bags* ]]; then
    echo "PASS: 5 orders (31F at its latest revision), 36.00 USD, 600 bags of which 3 missing: nothing lost, nothing doubled"
else
    echo "FAIL: expected $expect and $bags in: $json"
    exit 1
fi
kill -TERM "$server_pid" && wait "$server_pid" 2>/dev/null || true
server_pid=""
echo "Demo files, logs and the store are in $demo"
