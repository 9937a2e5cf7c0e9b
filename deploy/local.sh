#!/usr/bin/env bash
# Runs Jetbridge on one machine as separate long-running processes: one aggregator and N device sync services,
# each with its own home under JETBRIDGE_LOCAL (default .jetbridge/local). Keys are made and devices allowed on the
# first run and kept after that. Capture into any device from another terminal while it runs:
#     jetbridge-agent --home .jetbridge/local/device-1 order --seat 17B --item Peanuts=2
# Ctrl-C or SIGTERM stops the agents first (each acknowledges what the ground confirmed), then the aggregator.
# Usage: deploy/local.sh [DEVICES]      (default 3; endpoints: LOCAL_DATA, LOCAL_ACKS)
set -euo pipefail
cd "$(dirname "$0")/.."
devices=${1:-3}
[[ $devices =~ ^[1-9][0-9]?$ ]] || { echo "usage: deploy/local.sh [DEVICES]   (1-99)" >&2; exit 64; }
base=${JETBRIDGE_LOCAL:-.jetbridge/local}
data=${LOCAL_DATA:-tcp://127.0.0.1:5560}
acks=${LOCAL_ACKS:-tcp://127.0.0.1:5561}

for product in jetbridge-agent jetbridge-aggregator; do
    swift build --product "$product" >/dev/null
done
bin=$(swift build --show-bin-path)
mkdir -p "$base/ground" "$base/logs"
ground=$base/ground

[ -f "$ground/keys/server.pub" ] || "$bin/jetbridge-aggregator" --home "$ground" keys generate >/dev/null
server_key=$(cat "$ground/keys/server.pub")
for n in $(seq 1 "$devices"); do
    home=$base/device-$n
    mkdir -p "$home"
    if ! [ -f "$home/agent.json" ]; then
        printf '{"device": "device-%s", "ground": {"data": "%s", "acks": "%s", "serverPublicKey": "%s"}}\n' \
            "$n" "$data" "$acks" "$server_key" > "$home/agent.json"
    fi
    if ! [ -f "$home/keys/device.pub" ]; then
        "$bin/jetbridge-agent" --home "$home" keys generate >/dev/null
        "$bin/jetbridge-aggregator" --home "$ground" devices allow "device-$n" -- "$(cat "$home/keys/device.pub")"
    fi
done

pids=()
stop() {
    trap - INT TERM EXIT
    echo "stopping: agents first, then the aggregator"
    for pid in "${pids[@]:1}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]:1}"; do wait "$pid" 2>/dev/null || true; done
    kill -TERM "${pids[0]}" 2>/dev/null || true
    wait "${pids[0]}" 2>/dev/null || true
    echo "stopped; homes and logs are in $base"
}
trap stop INT TERM EXIT

"$bin/jetbridge-aggregator" --home "$ground" serve --data "$data" --acks "$acks" >> "$base/logs/aggregator.log" 2>&1 &
pids+=($!)
sleep 1
kill -0 "${pids[0]}" 2>/dev/null || { echo "the aggregator did not start; see $base/logs/aggregator.log" >&2; exit 69; }
for n in $(seq 1 "$devices"); do
    "$bin/jetbridge-agent" --home "$base/device-$n" sync >> "$base/logs/device-$n.log" 2>&1 &
    pids+=($!)
done

echo "aggregator (pid ${pids[0]}) on $data and $acks; $devices device sync services; logs in $base/logs"
echo "capture:  $bin/jetbridge-agent --home $base/device-1 order --seat 17B --item Peanuts=2"
echo "report:   $bin/jetbridge-aggregator --home $ground report flights"
echo "Ctrl-C stops everything."
wait "${pids[0]}"
