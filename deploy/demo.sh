#!/usr/bin/env bash
# Demo of what is built so far. Grows into the whole-pipeline demo as the parts land.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! pkg-config --exists libzmq 2>/dev/null; then
    if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq libzmq3-dev pkg-config >/dev/null
    else sudo apt-get update -qq && sudo apt-get install -y -qq libzmq3-dev pkg-config >/dev/null; fi
fi
swift build -c release
echo "Nothing to demo yet: the parts are still being built."
