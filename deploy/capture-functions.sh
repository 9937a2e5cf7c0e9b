# Sourced by deploy/demo.sh, deploy/scale-out.sh, deploy/failover.sh and deploy/local.sh (not run on its own): the
# devices of the demos and what they capture in flight, so the scripts capture the same records and check the same
# totals; the two aggregators of the shared-store demos (scale-out.sh, failover.sh); the build's packages (local.sh too).
# Needs: bin (the directory of the binaries: build_products sets it), demo (the demo directory: each device's home is
# $demo/DEVICE), flight (the flight the devices sell on).

# What the captured records total on the ground: 5 orders (31F at its latest revision) worth 36.00 USD, 600 bags of
# which 3 missing. The ground's `report flights --format json`, spaces removed, contains both.
expected_orders='"orders":5,"revenue":3600'
expected_bags='"checked":600,"departed":600,"arrived":597,"missing":3'

agent() { # agent DEVICE ARGS...: the device's agent, with its own home
    local device=$1
    shift
    "$bin/jetbridge-agent" --home "$demo/$device" "$@"
}
uuid() { tr a-f A-F < /proc/sys/kernel/random/uuid; }
forget_pid() { # forget_pid PID: drops a pid the script has waited for from `pids`, so that a cleanup trap never kills
    # a process that took the number since
    local kept=() pid
    for pid in "${pids[@]}"; do [ "$pid" = "$1" ] || kept+=("$pid"); done
    pids=("${kept[@]}")
}
acknowledged() { agent "$1" status --json | tr -d '\n ' | sed -E 's/.*"acknowledgedThrough":([0-9]+).*/\1/'; }

missing_build_packages() { # missing_build_packages [INCLUDE_DIR]: the Debian packages of the headers the build needs
    # that INCLUDE_DIR (/usr/include) lacks, each checked on its own: libzmq3-dev (zmq.h), libsqlite3-dev (sqlite3.h)
    local include=${1:-/usr/include} missing=()
    [ -e "$include/zmq.h" ] || missing+=(libzmq3-dev)
    [ -e "$include/sqlite3.h" ] || missing+=(libsqlite3-dev)
    echo "${missing[*]}"
}

install_build_packages() { # install_build_packages: installs what missing_build_packages names (apt-get, sudo unless root)
    local packages sudo_cmd=""
    packages=$(missing_build_packages)
    [ -n "$packages" ] || return 0
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    echo "== installing the headers the build needs (Debian packages $packages)"
    # shellcheck disable=SC2086 # one word per package
    $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq $packages >/dev/null
}

absolute_bin() { # absolute_bin: JETBRIDGE_BIN made absolute against the caller's directory; the scripts call it before
    # they cd to the checkout, so `JETBRIDGE_BIN=bin deploy/demo.sh` finds ./bin wherever it is run from
    [ -n "${JETBRIDGE_BIN:-}" ] || return 0
    local absolute
    absolute=$(CDPATH='' cd -- "$JETBRIDGE_BIN" 2>/dev/null && pwd) || {
        echo "no directory $JETBRIDGE_BIN (JETBRIDGE_BIN or --bin)" >&2
        exit 66
    }
    export JETBRIDGE_BIN=$absolute
}

build_products() { # build_products PRODUCT...: sets bin: $JETBRIDGE_BIN when set, else debug builds of PRODUCT here
    local product
    if [ -n "${JETBRIDGE_BIN:-}" ]; then
        bin=$(cd "$JETBRIDGE_BIN" && pwd) || exit 66
        for product in "$@"; do
            [ -x "$bin/$product" ] || { echo "no executable $bin/$product (JETBRIDGE_BIN)" >&2; exit 66; }
        done
        echo "== using the binaries in $bin (JETBRIDGE_BIN): $("$bin/$1" --version)"
        return
    fi
    echo "== building (debug; the first build takes 15-20 minutes on 2 cores)"
    for product in "$@"; do
        swift build --product "$product" >/dev/null
    done
    bin=$(swift build --show-bin-path)
}

make_device() { # make_device DEVICE GROUND: the device's home, agent.json (GROUND: its `ground` JSON) and key pair
    local device=$1 endpoints=$2 batch=100 window=8
    mkdir -p "$demo/$device"
    # gate-1 sends small batches one at a time, so its sync lasts long enough to kill an aggregator during it.
    [ "$device" = gate-1 ] && batch=10 window=1
    cat > "$demo/$device/agent.json" <<JSON
{"device": "$device", "flight": "$flight",
 "ground": $endpoints,
 "sync": {"batchRecords": $batch, "window": $window}}
JSON
    # Prints the device's public key.
    agent "$device" keys generate | sed -n 's/^public key *//p'
}

sell() { # two attendants sell on cart-1 and cart-2; the passenger in 31F then changes the order (revision 2)
    local id
    agent cart-1 order --seat 17B --item Peanuts=2 --item Chips
    agent cart-1 order --seat 17C --item Popcorn
    agent cart-1 order --seat 17B --item Popcorn=2
    agent cart-2 order --seat 30A --item Chips=3
    id=$(agent cart-2 order --seat 31F --item Peanuts --json | tr -d '\n' | sed -E 's/.*"id" *: *"([^"]+)".*/\1/')
    echo "   (the passenger in 31F changes the order: same id, revision 2)"
    agent cart-2 order --amend "$id" --item Peanuts=2 --item Popcorn
}

scan_bags() { # a handler on gate-1 scans 600 bags at departure and, after landing, 597 of them on arrival
    local tags=$demo/tags.txt i
    local initials=(A B C D E F G H) families=(SMI JON LEE KIM ZMU NGU BAR OKA)
    : > "$tags"
    for i in $(seq 1 600); do
        printf '{"id": "%s", "owner": ["%s", "%s"], "weight": %d.5}\n' \
            "$(uuid)" "${initials[i % 8]}" "${families[i % 8]}" $((20 + i % 30)) >> "$tags"
    done
    agent gate-1 scan --at origin < "$tags"
    head -n 597 "$tags" | agent gate-1 scan --at destination
}

show_queues() { # each device's unacknowledged records
    local device
    for device in cart-1 cart-2 gate-1; do
        printf '   %-7s %s\n' "$device" "$(agent "$device" status | grep -E '^unacknowledged')"
    done
}

# The two aggregators of the shared-store demos. Need: bin, demo, store (the shared store's URL), port (the first of six
# loopback ports; call aggregator_endpoints once it is set), pids (an array the caller's cleanup kills).
aggregator() { # aggregator NAME ARGS...: aggregator NAME's command, with its own home $demo/ground-NAME
    local name=$1
    shift
    "$bin/jetbridge-aggregator" --home "$demo/ground-$name" "$@"
}
aggregator_endpoints() { # sets data_a acks_a data_b acks_b metrics_a metrics_b: ports port … port + 5 on loopback
    data_a=tcp://127.0.0.1:$port acks_a=tcp://127.0.0.1:$((port + 1))
    data_b=tcp://127.0.0.1:$((port + 2)) acks_b=tcp://127.0.0.1:$((port + 3))
    metrics_a=127.0.0.1:$((port + 4)) metrics_b=127.0.0.1:$((port + 5))
}
start_aggregator() { # start_aggregator NAME DATA ACKS [METRICS]: prints nothing, sets last_pid
    local metrics=()
    [ -z "${4:-}" ] || metrics=(--metrics "$4")
    # The binary itself, not a shell function, so that $! is the server's own pid (kill -9 must reach it).
    "$bin/jetbridge-aggregator" --home "$demo/ground-$1" serve --store "$store" --data "$2" --acks "$3" \
        "${metrics[@]}" >> "$demo/aggregator-$1.log" 2>&1 &
    last_pid=$!
    pids+=("$last_pid")
}
allow_devices_on_both() { # each aggregator's key pair, one pair per device, each device allowed on both aggregators
    local key_a key_b ground_list device device_key
    mkdir -p "$demo/ground-a" "$demo/ground-b"
    key_a=$(aggregator a keys generate)
    key_b=$(aggregator b keys generate)
    ground_list="[{\"data\": \"$data_a\", \"acks\": \"$acks_a\", \"serverPublicKey\": \"$key_a\"},
            {\"data\": \"$data_b\", \"acks\": \"$acks_b\", \"serverPublicKey\": \"$key_b\"}]"
    for device in cart-1 cart-2 gate-1; do
        device_key=$(make_device "$device" "$ground_list")
        aggregator a devices allow "$device" -- "$device_key" >/dev/null
        aggregator b devices allow "$device" -- "$device_key" >/dev/null
    done
    echo "aggregator A: $data_a $acks_a   aggregator B: $data_b $acks_b"
}
start_both_and_sync() { # start_both_and_sync [METRICS_A METRICS_B]: both aggregators (pid_a, pid_b), then the three
    # devices' syncs (sync_pids); returns once gate-1 has over 100 records acknowledged (or after 10 s)
    start_aggregator a "$data_a" "$acks_a" "${1:-}"
    pid_a=$last_pid
    start_aggregator b "$data_b" "$acks_b" "${2:-}"
    pid_b=$last_pid
    sleep 1
    for pid in "$pid_a" "$pid_b"; do
        kill -0 "$pid" 2>/dev/null || { echo "an aggregator did not start:"; cat "$demo"/aggregator-*.log; exit 1; }
    done
    sync_pids=()
    local device
    for device in cart-1 cart-2 gate-1; do
        # The binary itself, not the `agent` function: `$!` of a function run in the background is the subshell's
        # pid, and a kill of it left the agent running.
        "$bin/jetbridge-agent" --home "$demo/$device" sync --until-drained --timeout 180 > "$demo/$device-sync.log" 2>&1 &
        sync_pids+=($!)
        pids+=($!)
    done
    for _ in $(seq 1 500); do
        [ "$(acknowledged gate-1)" -gt 100 ] && break
        sleep 0.02
    done
}
