#!/usr/bin/env bash
# Times `jetbridge-aggregator receipts rebuild` on a store of 180,000 orders (200 flights x 180 seats x 5 orders,
# 3 lines each): once from scratch (writes 72,000 files) and then RUNS times on the unchanged store, where it reads,
# decodes and renders every receipt and compares it with the file (no writes): the receipt renderers' cost.
# Usage: Benchmarks/ReceiptsRebuild/run.sh [AGGREGATOR_BINARY...]   (default: a release build of this checkout)
# Several binaries (e.g. before and after a change) are run in turn on the same store. Needs Python's msgpack.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
runs=${RUNS:-3}
if [ $# -eq 0 ]; then
    (cd "$here/../.." && swift build -c release --product jetbridge-aggregator >/dev/null)
    set -- "$(cd "$here/../.." && swift build -c release --show-bin-path)/jetbridge-aggregator"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
home=$work/home
"$1" --home "$home" serve --insecure --data "ipc://$work/data" --acks "ipc://$work/acks" >"$work/serve.log" 2>&1 &
serve=$!
for _ in $(seq 1 100); do grep -q "aggregator serving" "$work/serve.log" && break; sleep 0.1; done
kill -TERM "$serve"
wait "$serve" || true
python3 "$here/fill-store.py" "$home/jetbridge.sqlite"
/usr/bin/time -f "from scratch: %e s wall, %U s user, %S s sys" "$1" --home "$home" receipts rebuild
printf '%-60s %8s %8s %8s\n' binary wall user sys
for _ in $(seq 1 "$runs"); do
    for binary in "$@"; do
        /usr/bin/time -o "$work/time" -f "%e %U %S" "$binary" --home "$home" receipts rebuild >/dev/null
        read -r wall user sys < "$work/time"
        printf '%-60s %8s %8s %8s\n' "$binary" "$wall" "$user" "$sys"
    done
done
