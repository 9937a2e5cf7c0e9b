#!/usr/bin/env bash
# Jetbridge failover demo on one machine: the ground's PostgreSQL fails over under a sync, through pg_auto_failover.
#   1. a pg_auto_failover formation on loopback (Debian packages postgresql-15-auto-failover, pg-auto-failover-cli):
#      a monitor, a primary and a synchronous standby, each a pg_autoctl keeper running as the `postgres` user (as
#      root) in a temporary directory; the monitor's failover timeouts are shortened for the demo (see below);
#   2. two aggregators (`serve --store URL`, the URL `pg_autoctl show uri --formation default` prints, with the user
#      added), each with its own home and endpoints; three devices, each allowed on both, list both in `ground`;
#   3. in flight (no ground), two attendants sell and a handler scans bags, all into each device's file queue;
#   4. after landing, the three devices sync at once; mid-sync the primary's host "dies": its postgres (postmaster and
#      every backend) and its pg_autoctl keeper (and the keeper's services) are SIGKILLed at once, so nothing restarts
#      it locally and the monitor has to fail over; the aggregators answer `retry` meanwhile, then write to the new
#      primary (`--kill standby`: the standby dies instead, and the primary goes on alone, as wait_primary);
#   5. the flight report from the formation, the failover's figures (seconds from the kill to the new primary, and to
#      the first acknowledgement through it; records acknowledged and then missing from the new primary, which must
#      be 0), and a last line starting `PASS:` or `FAIL:`.
# A SIGKILL on one machine is not quite a dead host: the kernel closes the killed processes' sockets, so the
# aggregators and the monitor learn at once that the connection is gone, where a host that lost power leaves them to
# their timeouts (the store's keepalives and statement timeout: docs/STORE.md, "Timeouts"; the monitor's health check).
# Nothing outside DEMO_DIR (a new temporary directory by default) and the formation's directory is written; on every
# exit each process the script started is stopped by its pid and the formation's directory removed (the demo
# directory stays, with the logs).
# Endpoints: 127.0.0.1 ports FAILOVER_PORT … +5 (default 5580); PostgreSQL: three free loopback ports. Binaries: those
# in --bin DIR or JETBRIDGE_BIN when set, else built here (debug).
set -euo pipefail
script_started=$EPOCHREALTIME
usage() {
    echo "usage: deploy/failover.sh [--kill primary|standby | --hold] [--bin DIR]"
    echo "  --kill primary   SIGKILL the primary's host mid-sync: the standby is promoted (default)"
    echo "  --kill standby   SIGKILL the synchronous standby's host instead: the primary goes on alone (wait_primary)"
    echo "  --hold           only form the formation, print its URLs and keep it until Ctrl-C (to point"
    echo "                   sync-benchmark --store postgres at its primary, or try a failover by hand)"
    echo "  --bin DIR        use the jetbridge-agent and jetbridge-aggregator in DIR (as JETBRIDGE_BIN)"
}
victim=primary hold=0
while [ $# -gt 0 ]; do
    case $1 in
        --kill) victim=${2:-}; shift 2 || { usage >&2; exit 64; } ;;
        --hold) hold=1; shift ;;
        --bin) export JETBRIDGE_BIN=${2:-}; shift 2 || { usage >&2; exit 64; } ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 64 ;;
    esac
done
case $victim in primary | standby) ;; *) echo "failover.sh: --kill takes primary or standby, not '$victim'" >&2; exit 64 ;; esac
source "$(dirname "$0")/capture-functions.sh"
absolute_bin
cd "$(dirname "$0")/.."
root=$PWD

sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"
[ -n "${JETBRIDGE_BIN:-}" ] || install_build_packages
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
if ! command -v pg_autoctl >/dev/null || ! [ -x "$PG_BIN/initdb" ]; then
    echo "== installing pg_auto_failover (Debian packages postgresql-15-auto-failover, pg-auto-failover-cli)"
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq postgresql postgresql-15-auto-failover pg-auto-failover-cli >/dev/null
fi
# The check of what the device delivered reads its records with Python's msgpack; `ps` finds what the script started.
if ! python3 -c "import msgpack" 2>/dev/null || ! command -v ps >/dev/null; then
    $sudo_cmd apt-get update -qq
    $sudo_cmd apt-get install -y -qq python3 python3-msgpack procps >/dev/null
fi

build_products jetbridge-agent jetbridge-aggregator

demo=${DEMO_DIR:-$(mktemp -d -t jetbridge-failover.XXXXXX)}
mkdir -p "$demo"
port=${FAILOVER_PORT:-5580}
flight="ZA202/2026-11-25"

# The formation lives in its own directory, which the `postgres` user owns when this runs as root (PostgreSQL refuses
# to run as root). pg_autoctl keeps its configuration and state under XDG_CONFIG_HOME and XDG_DATA_HOME and its pid
# files under XDG_RUNTIME_DIR: all three point into that directory, so nothing is left in the user's home or /tmp.
formation=$(mktemp -d /tmp/jetbridge-failover-pg.XXXXXX)
chmod 0755 "$formation"
[ "$(id -u)" = 0 ] && chown postgres: "$formation"
# pg_cmd: the prefix that runs a command as the formation's user with pg_autoctl's directories in the formation's.
# setpriv, not runuser, and no shell function: `"${pg_cmd[@]}" pg_autoctl run … &` leaves $! the pg_autoctl process
# itself (each of env and setpriv execs the next), so that the keeper is stopped, and killed, by its own pid.
pg_cmd=(env HOME="$formation" XDG_CONFIG_HOME="$formation/config" XDG_DATA_HOME="$formation/share"
    XDG_RUNTIME_DIR="$formation/run" PATH="$PG_BIN:$PATH")
[ "$(id -u)" = 0 ] && pg_cmd=(setpriv --reuid=postgres --regid=postgres --init-groups "${pg_cmd[@]}")
# pg_autoctl falls back to /tmp when a directory named there does not exist yet.
"${pg_cmd[@]}" mkdir -p "$formation/config" "$formation/share" "$formation/run"
as_pg() { "${pg_cmd[@]}" "$@"; } # as_pg COMMAND...: COMMAND as the formation's user (in the foreground)
seconds_since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; } # seconds_since START END
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

keepers=() # the pg_autoctl keepers' pids, by node: monitor node1 node2
declare -A keeper_pid=() node_dir=() node_port=()
pids=()    # everything else this script started (aggregators, syncs)
descendants() { # descendants PID: every process under PID, depth first
    local child
    for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
        echo "$child"
        descendants "$child"
    done
}
postmaster_of() { # postmaster_of NODE: the pid in its postmaster.pid, if that process is still NODE's postgres
    local pid
    pid=$(head -n 1 "${node_dir[$1]}/postmaster.pid" 2>/dev/null) || return 0
    # A killed node's postmaster.pid stays behind, and its pid may since name another process.
    tr '\0' ' ' 2>/dev/null < "/proc/$pid/cmdline" | grep -qF -- "-D ${node_dir[$1]} " && echo "$pid" || true
}
node_processes() { # node_processes NODE: its keeper, the keeper's services, its postmaster and every backend
    local keeper=${keeper_pid[$1]:-} postmaster
    postmaster=$(postmaster_of "$1")
    {
        if [ -n "$keeper" ] && kill -0 "$keeper" 2>/dev/null; then echo "$keeper"; descendants "$keeper"; fi
        if [ -n "$postmaster" ] && kill -0 "$postmaster" 2>/dev/null; then echo "$postmaster"; descendants "$postmaster"; fi
    } | sort -un
}
cleanup() {
    local node pid procs shm
    set +e # every step is tried, whatever failed before it
    for pid in "${pids[@]}"; do { kill -9 "$pid" && wait "$pid"; } 2>/dev/null; done
    # The keepers first, politely: SIGTERM makes pg_autoctl stop its postgres (fast shutdown) and exit; whatever is
    # left after 15 s, and the processes of a node killed earlier, are killed by pid.
    for node in "${keepers[@]}"; do
        pid=${keeper_pid[$node]}
        kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null || true
    done
    for _ in $(seq 1 150); do
        procs=""
        for node in "${keepers[@]}"; do procs+=$(node_processes "$node"); done
        [ -z "$procs" ] && break
        sleep 0.1
    done
    for node in "${keepers[@]}"; do
        procs=$(node_processes "$node")
        # shellcheck disable=SC2086 # one word per pid
        [ -n "$procs" ] && kill -9 $procs 2>/dev/null || true
        # A postmaster killed with SIGKILL leaves its small System V segment behind (PostgreSQL removes it at the
        # next start, which does not come): remove it by the id its postmaster.pid names, when nothing is attached.
        pid=$(head -n 1 "${node_dir[$node]}/postmaster.pid" 2>/dev/null)
        shm=$(sed -n 7p "${node_dir[$node]}/postmaster.pid" 2>/dev/null | awk '{print $2}')
        if [ -n "$shm" ] && ipcs -m -i "$shm" 2>/dev/null | grep -q "cpid=$pid\b.*nattch=0\|nattch=0.*cpid=$pid\b"; then
            ipcrm -m "$shm" 2>/dev/null || true
        fi
    done
    rm -rf "$formation"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
echo "== demo directory: $demo   formation directory: $formation"

# The monitor's timeouts, shortened so that the demo fails over in seconds. Production keeps pg_auto_failover's
# defaults (in brackets): a health check every 1 s (5 s), a connect timeout of 1 s (5 s), 1 retry (2) 0.5 s apart
# (2 s), a node unhealthy once it has not reported for 3 s (20 s), and 3 s for a primary to drain before its standby
# is promoted (30 s). Shorter settings fail over sooner and on shorter hiccups (a long GC pause, a network blip):
# false failovers. The keepers' network_partition_timeout (a primary that cannot reach the monitor or its standby for
# that long demotes itself) goes down with them, 2 s (20 s): it must stay below primary_demote_timeout, so that an
# isolated primary has stopped taking writes before its standby is promoted.
monitor_settings="pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_max_retries = 1
pgautofailover.health_check_retry_delay = 500
pgautofailover.node_considered_unhealthy_timeout = 3000
pgautofailover.primary_demote_timeout = 3000"
network_partition_timeout=2

start_keeper() { # start_keeper NODE: pg_autoctl run on NODE's directory, in the background
    "${pg_cmd[@]}" pg_autoctl run --pgdata "${node_dir[$1]}" >> "$formation/$1.log" 2>&1 < /dev/null &
    keeper_pid[$1]=$!
    keepers+=("$1")
}
monitor_sql() { # monitor_sql SQL: one query on the monitor, unaligned
    "$PG_BIN/psql" -X -q -At -h 127.0.0.1 -p "${node_port[monitor]}" -U autoctl_node -d pg_auto_failover -c "$1"
}
state_of() { # state_of NODE: its reported state, as the monitor has it
    monitor_sql "SELECT reportedstate FROM pgautofailover.node WHERE nodename = '$1'" 2>/dev/null || true
}
node_sql() { # node_sql NODE SQL: one query on NODE's jetbridge database
    "$PG_BIN/psql" -X -q -At -h 127.0.0.1 -p "${node_port[$1]}" -U postgres -d jetbridge -c "$2"
}

echo
echo "== 1. a pg_auto_failover formation: a monitor, a primary and a synchronous standby (about 15 s)"
started=$EPOCHREALTIME
for node in monitor node1 node2; do
    node_dir[$node]=$formation/$node
    node_port[$node]=$(free_port)
done
as_pg pg_autoctl create monitor --pgdata "${node_dir[monitor]}" --pgport "${node_port[monitor]}" \
    --hostname localhost --auth trust --no-ssl > "$formation/monitor-create.log" 2>&1 \
    || { cat "$formation/monitor-create.log"; exit 1; }
echo "$monitor_settings" >> "${node_dir[monitor]}/postgresql.conf"
start_keeper monitor
monitor_uri=""
for _ in $(seq 1 100); do
    monitor_uri=$(monitor_sql "SELECT 1" >/dev/null 2>&1 \
        && as_pg pg_autoctl show uri --pgdata "${node_dir[monitor]}" | sed -n 's/^ *monitor | monitor | //p') \
        && [ -n "$monitor_uri" ] && break
    sleep 0.1
done
[ -n "$monitor_uri" ] || { echo "the monitor did not start:"; cat "$formation/monitor.log"; exit 1; }
for node in node1 node2; do
    as_pg pg_autoctl create postgres --pgdata "${node_dir[$node]}" --pgport "${node_port[$node]}" \
        --hostname localhost --listen localhost --auth trust --no-ssl --monitor "$monitor_uri" \
        --dbname jetbridge --name "$node" > "$formation/$node-create.log" 2>&1 \
        || { cat "$formation/$node-create.log"; exit 1; }
    as_pg pg_autoctl config set --pgdata "${node_dir[$node]}" timeout.network_partition_timeout \
        "$network_partition_timeout" >/dev/null
    start_keeper "$node"
done
for _ in $(seq 1 600); do
    [ "$(state_of node1) $(state_of node2)" = "primary secondary" ] && break
    sleep 0.1
done
[ "$(state_of node1) $(state_of node2)" = "primary secondary" ] \
    || { echo "the formation did not form:"; as_pg pg_autoctl show state --pgdata "${node_dir[monitor]}"; exit 1; }
echo "formed in $(seconds_since "$started" "$EPOCHREALTIME") s"
as_pg pg_autoctl show state --pgdata "${node_dir[monitor]}"
echo "synchronous_standby_names on the primary: $(node_sql node1 'SHOW synchronous_standby_names')"
# `show uri` names no user (libpq would take the operating system's user name); the store URL needs one.
formation_uri=$(as_pg pg_autoctl show uri --pgdata "${node_dir[monitor]}" --formation default)
store=${formation_uri/#postgres:\/\//postgres://postgres@}
echo "pg_autoctl show uri --formation default: $formation_uri"
echo "store: $store"
"$bin/jetbridge-aggregator" --home "$demo/ground-a" store migrate --store "$store"
if [ "$hold" = 1 ]; then
    echo
    echo "The formation runs until Ctrl-C (then it is stopped and removed). Its primary alone, for tools that take one"
    echo "server (sync-benchmark --store postgres URL: its commits still wait for the synchronous standby):"
    echo "  postgres://postgres@localhost:${node_port[node1]}/jetbridge"
    echo "State: PATH=$PG_BIN:\$PATH pg_autoctl show state --pgdata ${node_dir[monitor]} (as the formation's user," \
        "with XDG_CONFIG_HOME=$formation/config XDG_DATA_HOME=$formation/share)"
    while kill -0 "${keeper_pid[monitor]}" 2>/dev/null; do sleep 1; done
    exit 0
fi

aggregator_endpoints

echo
echo "== 2. keys: each aggregator's pair, one pair per device, each device allowed on both aggregators"
allow_devices_on_both

echo
echo "== 3. in flight, offline: two attendants sell, a handler scans 600 bags out and 597 in"
sell >/dev/null
scan_bags >/dev/null
show_queues

# The ids (and order revisions) of the records in the devices' delivered/ files: what the ground acknowledged to
# them (docs/AGENT.md, "Proof of delivery"), one "id revision" line each (revision 0: a scan).
acknowledged_ids() { # acknowledged_ids DIR...: DIR is a device's delivered/ directory
    python3 - "$@" <<'PY'
import glob, os, struct, sys, uuid
import msgpack
for directory in sys.argv[1:]:
    for path in glob.glob(os.path.join(directory, "*.records")):
        data = open(path, "rb").read()
        offset = 0
        while offset + 8 <= len(data):
            (length,) = struct.unpack_from("<I", data, offset)
            payload = data[offset + 8:offset + 8 + length]
            if len(payload) < length:
                break
            offset += 8 + length
            record = msgpack.unpackb(payload, raw=False, strict_map_key=False)
            ident = record["id"]
            ident = str(uuid.UUID(bytes=ident)) if isinstance(ident, bytes) else str(ident).lower()
            print(ident, record.get("revision", 0))
PY
}
missing_on() { # missing_on NODE FILE: how many of FILE's "id revision" lines NODE's store lacks (or holds older)
    "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "${node_port[$1]}" -U postgres -d jetbridge \
        -c "CREATE TEMP TABLE acked (id uuid, revision bigint)" -c "\\copy acked FROM pstdin WITH (DELIMITER ' ')" \
        -c "SELECT count(*) FROM acked a
            WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.id = a.id AND o.revision >= a.revision)
              AND NOT EXISTS (SELECT 1 FROM scans s WHERE s.id = a.id)" < "$2"
}
delivered_dirs() { local device; for device in cart-1 cart-2 gate-1; do echo "$demo/$device/delivered"; done; }

echo
echo "== 4. landed: both aggregators start on the formation's URL; the three devices sync at once"
start_both_and_sync "$metrics_a" "$metrics_b"
if [ "$victim" = primary ]; then
    victim_node=$(monitor_sql "SELECT nodename FROM pgautofailover.node WHERE reportedstate = 'primary'")
else
    victim_node=$(monitor_sql "SELECT nodename FROM pgautofailover.node WHERE reportedstate = 'secondary'")
fi
[ "$victim_node" = node1 ] && survivor=node2 || survivor=node1
# The host dies: every process of the node at once, by pid (none of them gets to shut down, nothing restarts it).
victim_procs=$(node_processes "$victim_node")
# shellcheck disable=SC2086 # one word per pid
ps -o pid,ppid,cmd -p $victim_procs > "$demo/killed-processes.txt"
# shellcheck disable=SC2086 # one word per pid
{ kill -9 $victim_procs; killed_at=$EPOCHREALTIME; wait "${keeper_pid[$victim_node]}"; } 2>/dev/null || true
keeper_pid[$victim_node]="" # reaped: its pid may name another process from now on
acked_at_kill=$(acknowledged gate-1)
mkdir -p "$demo/acknowledged-at-kill"
acknowledged_ids $(delivered_dirs) > "$demo/acknowledged-at-kill/ids.txt"
echo "-- $victim_node (the $victim) killed with SIGKILL at $(date -u -d "@$killed_at" +%H:%M:%S.%3N): its postgres and its pg_autoctl keeper, $(echo $victim_procs | wc -w) processes; $acked_at_kill of 1197 gate-1 records acknowledged"

# The survivor's new role: promoted (wait_primary, then primary once the old one is back as a standby, which it is
# not here), or, with the standby killed, the primary alone (wait_primary: synchronous_commit off).
new_state_at="" first_ack_at="" acked_at_new="" state=""
for _ in $(seq 1 900); do
    now=$EPOCHREALTIME
    if [ -z "$new_state_at" ]; then
        state=$(state_of "$survivor")
        if [ "$state" = wait_primary ] || { [ "$victim" = primary ] && [ "$state" = primary ]; }; then
            new_state_at=$now
            acked_at_new=$(acknowledged gate-1)
        fi
    elif [ "$(acknowledged gate-1)" -gt "$acked_at_new" ]; then
        first_ack_at=$EPOCHREALTIME
        break
    fi
    [ "$acked_at_new" = 1197 ] && break
    sleep 0.1
done
if [ "$victim" = primary ]; then
    took_over="the new primary" through_it="through it" event="a PostgreSQL failover" at_event="at the failover"
else
    took_over="the primary alone, without a synchronous standby" through_it="from the primary alone"
    event="the loss of the synchronous standby" at_event="once it was alone"
fi
# The sockets to the killed node left at that moment, and any of its processes still alive (there must be none).
ss -tnoa "( dport = :${node_port[$victim_node]} or sport = :${node_port[$victim_node]} )" \
    > "$demo/victim-sockets.txt" 2>&1 || true
alive=$(for pid in $victim_procs; do kill -0 "$pid" 2>/dev/null && echo "$pid"; done || true)
[ -z "$alive" ] || echo "-- still alive after SIGKILL: $alive"
if [ -n "$new_state_at" ]; then
    echo "-- $survivor is $took_over ($state) $(seconds_since "$killed_at" "$new_state_at") s after the kill"
    missing_at_failover=$(missing_on "$survivor" "$demo/acknowledged-at-kill/ids.txt")
    echo "   of the $(wc -l < "$demo/acknowledged-at-kill/ids.txt") records acknowledged before the kill, $missing_at_failover missing on $survivor"
else
    echo "-- $survivor did not take over within 90 s: $(as_pg pg_autoctl show state --pgdata "${node_dir[monitor]}")"
    missing_at_failover=unknown
fi
[ -n "$first_ack_at" ] && echo "-- first acknowledgement $through_it $(seconds_since "$killed_at" "$first_ack_at") s after the kill"
failed=0
for i in "${!sync_pids[@]}"; do
    wait "${sync_pids[$i]}" || failed=1
    forget_pid "${sync_pids[$i]}"
done
synced_at=$EPOCHREALTIME
for device in cart-1 cart-2 gate-1; do
    echo "   $device: $(tail -n 1 "$demo/$device-sync.log")"
done
for name in a b; do # what each aggregator saw of the store: the outage, and its end on the new primary
    grep -hE "store unreachable|store reachable again" "$demo/aggregator-$name.log" \
        | sed -E 's/^([^ ]+) [a-z]+ .*(server=[^ ]+ \([a-z-]+\)).*\] (.*)$/\1 \3 (\2)/; t
                  s/^([^ ]+) [a-z]+ .*(did not answer within [0-9]+ s).*\] (.*)$/\1 \3 (\2)/; t
                  s/^([^ ]+) [a-z]+ .*\] (.*)$/\1 \2/' \
        | sed "s/^/   aggregator $name: /" || true
done
as_pg pg_autoctl show state --pgdata "${node_dir[monitor]}"
echo "synchronous_standby_names on $survivor: '$(node_sql "$survivor" 'SHOW synchronous_standby_names')'," \
    "synchronous_commit: $(node_sql "$survivor" 'SHOW synchronous_commit')"

echo
echo "== 5. the ground's view, from the formation"
aggregator b report flights --store "$store"
echo
aggregator b report devices --store "$store"

echo
echo "-- checks"
json=$(aggregator b report flights --store "$store" --format json | tr -d '\n ')
acknowledged_ids $(delivered_dirs) > "$demo/acknowledged-at-end.txt"
missing_at_end=$(missing_on "$survivor" "$demo/acknowledged-at-end.txt")
# A mismatch is a device's proof of delivery finding the ground short of what it acknowledged (then repaired by a
# resend): with a synchronous standby there must be none.
mismatches=0
for metrics in "$metrics_a" "$metrics_b"; do
    n=$(python3 -c 'import sys, urllib.request
for line in urllib.request.urlopen("http://" + sys.argv[1] + "/metrics", timeout=5).read().decode().splitlines():
    if line.startswith("jetbridge_summaries_total{") and "status=\"mismatch\"" in line:
        print(int(float(line.split()[-1])))' "$metrics" 2>/dev/null | head -n 1)
    mismatches=$((mismatches + ${n:-0}))
done
kill -TERM "$pid_a" "$pid_b" 2>/dev/null && wait "$pid_a" "$pid_b" 2>/dev/null || true
forget_pid "$pid_a"
forget_pid "$pid_b"
figures="$victim killed; $survivor"
if [ -n "$new_state_at" ]; then
    figures+=" $state after $(seconds_since "$killed_at" "$new_state_at") s"
else
    figures+=" never took over"
fi
figures+=", first ack $through_it after $([ -n "$first_ack_at" ] && seconds_since "$killed_at" "$first_ack_at" || echo "—") s"
figures+=", sync done $(seconds_since "$killed_at" "$synced_at") s after the kill"
figures+="; acknowledged then missing: $missing_at_failover of $(wc -l < "$demo/acknowledged-at-kill/ids.txt") $at_event"
figures+=", $missing_at_end of $(wc -l < "$demo/acknowledged-at-end.txt") at the end; proof-of-delivery mismatches: $mismatches"
if [ "$failed" = 0 ] && [ -n "$new_state_at" ] && [ -n "$first_ack_at" ] && [ "$missing_at_failover" = 0 ] \
    && [ "$missing_at_end" = 0 ] && [ "$mismatches" = 0 ] \
    && [[ $json == *$expected_orders* && $json == *$expected_bags* ]]; then
    echo "PASS: 5 orders (31F at its latest revision), 36.00 USD, 600 bags of which 3 missing, through $event mid-sync: nothing lost, nothing doubled ($figures)"
else
    echo "FAIL: every sync drained: $([ "$failed" = 0 ] && echo yes || echo no); $figures; expected $expected_orders and $expected_bags in: $json"
    exit 1
fi
echo "Took $(seconds_since "$script_started" "$EPOCHREALTIME") s. Demo files and logs are in $demo (the formation is stopped and removed on exit)"
