#!/usr/bin/env bash
# Fuzzes the MessagePack decoder, and the aggregator's record decoder against it, for SECONDS (default 60) with libFuzzer and AddressSanitizer.
# Seeds come from the test suite fixtures, written to a temporary directory (not into git).
# Exits non-zero when libFuzzer reports a crash, leak, timeout or out-of-memory input.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"

swift build --scratch-path .build-fuzz --product messagepack-fuzz --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address
binary="$(swift build --scratch-path .build-fuzz --product messagepack-fuzz --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address --show-bin-path)/messagepack-fuzz"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
python3 - "$work/corpus" <<'PY'
import json, sys, os
suite = json.load(open("Tests/MessagePackTests/Fixtures/msgpack-test-suite/msgpack-test-suite.json"))
n = 0
for cases in suite.values():
    for case in cases:
        for hexform in case["msgpack"]:
            open(os.path.join(sys.argv[1], "seed-%03d" % n), "wb").write(bytes.fromhex(hexform.replace("-", "")))
            n += 1
# An order-shaped record and an array of two, as the codec writes them.
order = bytes.fromhex(
    "89a474797065a56f72646572a26964d924" + "41"*36 + "a87265766973696f6e01a6666c69676874aa5a413130312f32303236"
    "a473656174a3313742a96c696e654974656d739182a46974656d82a46e616d65a75065616e757473a9756e69745072696365ccc8"
    "a5636f756e7402a863757272656e6379a3555344a9637265617465644174d6ff5a4af6a5a6646576696365a164")
open(os.path.join(sys.argv[1], "seed-order"), "wb").write(order)
open(os.path.join(sys.argv[1], "seed-orders"), "wb").write(b"\x92" + order + order)
# A bag scan (device "d"), alone and in a batch with the order, from a minimal packer for the types a scan uses.
import struct
def pack(v):
    if isinstance(v, str):
        b = v.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b
    if isinstance(v, float):
        return b"\xca" + struct.pack(">f", v)
    if isinstance(v, list):
        return bytes([0x90 | len(v)]) + b"".join(pack(x) for x in v)
    if isinstance(v, dict):
        return bytes([0x80 | len(v)]) + b"".join(pack(k) + pack(x) for k, x in v.items())
    if isinstance(v, bytes):  # an already packed value, such as a timestamp
        return v
    raise TypeError(v)
scan = pack({"type": "scan", "id": "9B2E7C1A-0D4F-4E8B-A6C3-5F1D2E3A4B5C",
             "tag": {"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D", "ZMU"], "weight": 21.5},
             "point": "origin", "scannedAt": bytes.fromhex("d6ff6a5a4af6"), "flight": "ZA101/2026-11-21",
             "device": "d"})
open(os.path.join(sys.argv[1], "seed-scan"), "wb").write(scan)
open(os.path.join(sys.argv[1], "seed-batch"), "wb").write(b"\x92" + order + scan)
PY

echo "fuzzing messagepack-fuzz for ${seconds}s"
set +e
SWIFT_BACKTRACE=enable=no "$binary" "$work/corpus" \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$work/artifacts/" -print_final_stats=1 >"$work/log" 2>&1
status=$?
set -e
grep -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)' "$work/log" | tail -n 60
if ls "$work/artifacts"/* >/dev/null 2>&1; then
    mkdir -p .build-fuzz/findings
    cp "$work/artifacts"/* .build-fuzz/findings/
    echo "fuzzing found a problem; inputs saved in .build-fuzz/findings" >&2
    exit 1
fi
exit "$status"
