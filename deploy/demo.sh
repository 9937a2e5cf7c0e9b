#!/usr/bin/env bash
# Jetbridge demo on the embedded defaults: three devices on one flight capture sales and bag scans while offline.
# Everything runs as separate processes against real files; nothing outside DEMO_DIR is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if ! [ -e /usr/include/zmq.h ]; then
    echo "== installing libzmq (libzmq3-dev)"
    sudo_cmd=""; [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq libzmq3-dev libsqlite3-dev >/dev/null
fi

echo "== building (release)"
swift build -c release --product jetbridge-agent >/dev/null
swift build -c release --product jetbridge-queue >/dev/null
bin=$root/.build/release

demo=${DEMO_DIR:-$(mktemp -d -t jetbridge-demo.XXXXXX)}
echo "== demo directory: $demo"
flight="ZA101/2026-11-21"

agent() { # agent DEVICE ARGS...: run the device's agent with its own home
    local device=$1; shift
    mkdir -p "$demo/$device"
    [ -f "$demo/$device/agent.json" ] || printf '{"device": "%s", "flight": "%s"}\n' "$device" "$flight" > "$demo/$device/agent.json"
    "$bin/jetbridge-agent" --home "$demo/$device" "$@"
}
uuid() { cat /proc/sys/kernel/random/uuid | tr a-f A-F; }

echo "== in flight: two attendants sell, offline"
agent cart-1 order --seat 17B --item Peanuts=2 --item Chips
agent cart-1 order --seat 17C --item Popcorn
agent cart-2 order --seat 30A --item Chips=3
id=$(agent cart-2 order --seat 31F --item Peanuts --json | tr -d '\n' | sed -E 's/.*"id" *: *"([^"]+)".*/\1/')
agent cart-2 order --amend "$id" --item Peanuts=2 --item Popcorn
agent cart-1 order --seat 17I --item Chips || echo "   (refused, as it should be: nothing was stored)"

echo "== at the gates: a handler scans 40 bags at departure and 38 on arrival"
tags=$demo/tags.txt
: > "$tags"
initials=(A B C D E F G H)
families=(SMI JON LEE KIM ZMU NGU BAR OKA)
for i in $(seq 1 40); do
    printf '{"id": "%s", "owner": ["%s", "%s"], "weight": %d.5}\n' "$(uuid)" "${initials[i % 8]}" "${families[i % 8]}" $((20 + i % 30)) >> "$tags"
done
agent gate-1 scan --at origin < "$tags"
head -n 38 "$tags" | agent gate-1 scan --at destination

echo "== what each device holds, waiting for the ground"
for device in cart-1 cart-2 gate-1; do
    echo "-- $device"
    agent "$device" status | grep -E '^(device|queued|unacknowledged|quarantined)'
    "$bin/jetbridge-queue" fsck "$demo/$device/queue" | tail -n 1
done

echo
echo "The ground side (sync over ZeroMQ, aggregation, receipts, reports) is not built yet; see the issue tracker."
echo "Demo files are in $demo"
