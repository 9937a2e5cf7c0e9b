#!/usr/bin/env bash
# Runs Jetbridge on one machine as separate long-running processes: one aggregator and N device sync services,
# each with its own home under JETBRIDGE_LOCAL (default .jetbridge/local). Keys are made and devices allowed on the
# first run and kept after that. Capture into any device from another terminal while it runs:
#     jetbridge-agent --home .jetbridge/local/device-1 order --seat 17B --item Peanuts=2
# Ctrl-C or SIGTERM stops the agents first (each acknowledges what the ground confirmed), then the aggregator.
# Usage: deploy/local.sh [--bin DIR] [DEVICES]      (default 3; endpoints: LOCAL_DATA, LOCAL_ACKS)
# Binaries: from --bin DIR; else jetbridge-agent and jetbridge-aggregator found together on PATH; else built from
# this checkout with `swift build` (debug).
set -euo pipefail
usage="usage: deploy/local.sh [--bin DIR] [DEVICES]   (DEVICES 1-99, default 3)"
bin=
while [ $# -gt 0 ]; do
    case $1 in
        --bin) [ $# -ge 2 ] || { echo "$usage" >&2; exit 64; }; bin=$(cd "$2" && pwd) || exit 66; shift 2 ;;
        --bin=*) bin=$(cd "${1#--bin=}" && pwd) || exit 66; shift ;;
        -h|--help) echo "$usage"; exit 0 ;;
        -*) echo "$usage" >&2; exit 64 ;;
        *) break ;;
    esac
done
cd "$(dirname "$0")/.."
devices=${1:-3}
[[ $devices =~ ^[1-9][0-9]?$ ]] || { echo "$usage" >&2; exit 64; }
base=${JETBRIDGE_LOCAL:-.jetbridge/local}
data=${LOCAL_DATA:-tcp://127.0.0.1:5560}
acks=${LOCAL_ACKS:-tcp://127.0.0.1:5561}

if [ -z "$bin" ] && command -v jetbridge-agent >/dev/null && command -v jetbridge-aggregator >/dev/null \
    && [ "$(dirname "$(command -v jetbridge-agent)")" = "$(dirname "$(command -v jetbridge-aggregator)")" ]; then
    bin=$(dirname "$(command -v jetbridge-agent)")
fi
if [ -z "$bin" ]; then
    source deploy/capture-functions.sh
    install_build_packages
    for product in jetbridge-agent jetbridge-aggregator; do
        swift build --product "$product" >/dev/null
    done
    bin=$(swift build --show-bin-path)
fi
for tool in jetbridge-agent jetbridge-aggregator; do
    [ -x "$bin/$tool" ] || { echo "deploy/local.sh: no executable $bin/$tool" >&2; exit 66; }
done
echo "using $bin/jetbridge-agent and $bin/jetbridge-aggregator"
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
    fi
    # Until it succeeded once (`.allowed`), not only when the key is new: a run stopped between the two commands
    # left a device whose key the ground never learnt. Not on every start, which would undo a revoke.
    if ! [ -f "$home/.allowed" ]; then
        "$bin/jetbridge-aggregator" --home "$ground" devices allow "device-$n" -- "$(cat "$home/keys/device.pub")" >/dev/null
        touch "$home/.allowed"
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
