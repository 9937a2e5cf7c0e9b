#!/usr/bin/env python3
"""Network-fault scenarios for `jetbridge-agent sync` (issues 14 and 17), run over a real impaired link.

Agents run in one network namespace, `jetbridge-aggregator serve` in another, joined by a veth pair:

    jbnl-dev (10.213.7.1)  ==veth==  jbnl-ground (10.213.7.2): relay :7001/:7002 -> serve 127.0.0.1:6001/:6002

Impairments, with what this kernel has (no netem): bandwidth through `tc qdisc ... tbf` on both veth ends; loss and
a cut link through nftables in the devices' namespace (`numgen random mod 100 < 5 drop`, a drop-all rule); delay
and jitter through a small delaying TCP relay of ours (this file, `relay` mode) in the ground's namespace; jitter keeps
the stream's order, since no packet reordering can be made without netem and TCP would undo it anyway.

Each profile gets a fresh ground and fresh device homes (4 devices x 3,000 bag scans by default) and prints, next to
the clean link of the same run: totals exact, goodput against the link's capacity, batches resent, duplicates
stored, and for the cut and flapping links the time from the link's return to each device's first new ack and to
drained. Needs root (namespaces); without it prints SKIP and exits 0, except under CI=true, where it fails.

    sudo python3 Tests/netlab/netlab.py [--bin .build/release] [--devices 4] [--records 3000] [--profiles a,b]

Only addresses inside the namespaces it creates are used; everything it creates is removed at the end.
"""

import argparse
import asyncio
import random
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid

DEV_NS, GROUND_NS = "jbnl-dev", "jbnl-ground"
DEV_IF, GROUND_IF = "jbnl-d", "jbnl-g"
DEV_IP, GROUND_IP = "10.213.7.1", "10.213.7.2"
SERVE_PORTS = (6001, 6002)  # data, acks: serve binds these on the ground's loopback
RELAY_PORTS = (7001, 7002)  # what the devices connect to
HERE = os.path.dirname(os.path.abspath(__file__))


# MARK: relay mode


async def _pump(reader, writer, delay, jitter=0.0):
    """Copies one direction, each chunk held `delay` seconds, ± `jitter` (uniform). Order is kept: a TCP stream
    cannot be reordered (the kernel would put its segments back in order anyway), so a chunk never overtakes the one
    before it; jitter shows as bursts and gaps."""
    queue = asyncio.Queue()
    last_due = 0.0

    async def deliver():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        try:
            writer.write_eof()
        except (OSError, RuntimeError):
            pass

    task = asyncio.ensure_future(deliver())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            due = max(last_due, time.monotonic() + delay + random.uniform(-jitter, jitter))
            last_due = due
            queue.put_nowait((due, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((0, None))
    try:
        await task
    except (ConnectionError, OSError):
        pass


async def _relay(listen_host, listen_port, target_host, target_port, delay, jitter):
    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(target_host, target_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            _pump(client_reader, server_writer, delay, jitter), _pump(server_reader, client_writer, delay, jitter),
            return_exceptions=True)
        for writer in (client_writer, server_writer):
            writer.close()

    server = await asyncio.start_server(handle, listen_host, listen_port)
    async with server:
        await server.serve_forever()


def relay_main(argv):
    listen_host, listen_port, target_host, target_port, delay = argv
    base, _, jitter = delay.partition("~")  # "0.3" or "0.3~0.1" (300 ms ± 100 ms)
    try:
        asyncio.run(
            _relay(listen_host, int(listen_port), target_host, int(target_port), float(base), float(jitter or 0)))
    except KeyboardInterrupt:
        pass


# MARK: the lab


def sh(*args, check=True, ns=None, **kwargs):
    command = (["ip", "netns", "exec", ns] if ns else []) + [str(a) for a in args]
    return subprocess.run(command, check=check, capture_output=True, text=True, **kwargs)


class Lab:
    """Two namespaces joined by a veth pair; removed by `close()`."""

    def __init__(self):
        self.up = False

    def create(self):
        self.close()
        sh("ip", "netns", "add", DEV_NS)
        self.up = True
        sh("ip", "netns", "add", GROUND_NS)
        sh("ip", "link", "add", DEV_IF, "netns", DEV_NS, "type", "veth", "peer", "name", GROUND_IF, "netns", GROUND_NS)
        for ns, interface, address in ((DEV_NS, DEV_IF, DEV_IP), (GROUND_NS, GROUND_IF, GROUND_IP)):
            sh("ip", "addr", "add", address + "/24", "dev", interface, ns=ns)
            sh("ip", "link", "set", interface, "up", ns=ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("nft", "add", "table", "inet", "netlab", ns=DEV_NS)
        sh("nft", "add", "chain", "inet", "netlab", "in", "{ type filter hook input priority 0; }", ns=DEV_NS)
        sh("nft", "add", "chain", "inet", "netlab", "out", "{ type filter hook output priority 0; }", ns=DEV_NS)

    def close(self):
        for ns in (DEV_NS, GROUND_NS):
            sh("ip", "netns", "del", ns, check=False)
        self.up = False

    def set_filter(self, rule):
        """One nftables rule on every packet crossing the veth in both directions (None: none)."""
        for chain, match in (("in", "iifname"), ("out", "oifname")):
            sh("nft", "flush", "chain", "inet", "netlab", chain, ns=DEV_NS)
            if rule:
                sh("nft", "add", "rule", "inet", "netlab", chain, match, DEV_IF, *rule.split(), ns=DEV_NS)

    def cut(self):
        self.set_filter("drop")

    def restore(self, rule=None):
        self.set_filter(rule)

    def set_rate(self, rate):
        for ns, interface in ((DEV_NS, DEV_IF), (GROUND_NS, GROUND_IF)):
            if rate:
                sh("tc", "qdisc", "replace", "dev", interface, "root", "tbf", "rate", rate, "burst", "16kb",
                   "latency", "1s", ns=ns)
            else:
                sh("tc", "qdisc", "del", "dev", interface, "root", ns=ns, check=False)


PROFILES = {
    # name: (description, link rate for tbf, relay delay each way, nft rule, capacity in bytes/s)
    "clean": ("clean link", None, 0.0, None, None),
    "loss5": ("5% loss each way", None, 0.0, "numgen random mod 100 < 5 drop", None),
    "slow": ("1 Mbit/s, 300 ms each way", "1mbit", 0.3, None, 125_000),
    # Delay as "seconds~jitter" for the relay: 300 ms ± 100 ms each way, order kept (no netem here to reorder).
    "jitter": ("300 ms ± 100 ms each way", None, "0.3~0.1", None, None),
    # 16 Mbit/s so the sync lasts long enough (about 1.5 s) to be cut in its middle, on an ack of half the records.
    "cut30": ("16 Mbit/s, 30 s cut mid-sync", "16mbit", 0.0, None, 2_000_000),
    "flap": ("1 Mbit/s, down 5 s / up 5 s", "1mbit", 0.0, None, 125_000),
}


class Run:
    """One profile: a fresh ground and fresh devices, synced while the link does what the profile says."""

    def __init__(self, args, lab, name, scratch):
        self.args, self.lab, self.name = args, lab, name
        self.dir = os.path.join(scratch, name)
        self.ground = os.path.join(self.dir, "ground")
        self.devices = ["dev-%02d" % i for i in range(1, args.devices + 1)]
        self.processes = []

    def tool(self, name):
        return os.path.join(self.args.bin, name)

    def aggregator(self, *args, ns=None):
        return sh(self.tool("jetbridge-aggregator"), "--home", self.ground, *args, ns=ns)

    def prepare(self):
        os.makedirs(self.ground)
        self.aggregator("keys", "generate")
        server_key = open(os.path.join(self.ground, "keys", "server.pub")).read().strip()
        self.payload = 0
        for device in self.devices:
            home = os.path.join(self.dir, device)
            os.makedirs(home)
            configuration = {
                "device": device, "flight": "ZA101/2026-11-21",
                "ground": {"data": "tcp://%s:%d" % (GROUND_IP, RELAY_PORTS[0]),
                           "acks": "tcp://%s:%d" % (GROUND_IP, RELAY_PORTS[1]), "serverPublicKey": server_key},
            }
            with open(os.path.join(home, "agent.json"), "w") as file:
                json.dump(configuration, file)
            sh(self.tool("jetbridge-agent"), "--home", home, "keys", "generate")
            key = open(os.path.join(home, "keys", "device.pub")).read().strip()
            self.aggregator("devices", "allow", "--", device, key)
            tags = "".join(
                json.dumps({"id": str(uuid.uuid4()).upper(), "owner": ["D", "ZMU"], "weight": 42.0}) + "\n"
                for _ in range(self.args.records))
            sh(self.tool("jetbridge-agent"), "--home", home, "scan", "--at", "origin", input=tags)
            queue = os.path.join(home, "queue")
            size = sum(os.path.getsize(os.path.join(queue, f)) for f in os.listdir(queue) if f.endswith(".seg"))
            self.payload += size - 24 * self.args.records  # frame headers are not payload

    def spawn(self, args, ns, log, acks=None):
        """Starts a process in `ns`, its output to `log`; with `acks` (a list), every ack the agent logs at debug
        level is appended to it as (monotonic time, records) the moment the line arrives."""
        out = open(log, "w")
        environment = dict(os.environ, JETBRIDGE_LOG_LEVEL="debug") if acks is not None else None
        process = subprocess.Popen(["ip", "netns", "exec", ns] + [str(a) for a in args],
                                   stdout=subprocess.PIPE if acks is not None else out, stderr=subprocess.STDOUT,
                                   start_new_session=True, env=environment, text=acks is not None)
        if acks is not None:
            pattern = re.compile(r"#\d+…\d+ stored: (\d+) new, (\d+) duplicates")

            def read():
                for line in process.stdout:
                    match = pattern.search(line)
                    if match:
                        acks.append((time.monotonic(), int(match.group(1)) + int(match.group(2))))
                    elif "debug" not in line:
                        out.write(line)
                out.close()

            threading.Thread(target=read, daemon=True).start()
        self.processes.append(process)
        return process

    def stored(self):
        """Per device: records received, new, duplicates (the ground's devices table, read-only)."""
        path = os.path.join(self.ground, "jetbridge.sqlite")
        try:
            db = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=1)
            try:
                rows = db.execute("SELECT device, records, new_records, duplicates FROM devices").fetchall()
            finally:
                db.close()
        except sqlite3.Error:
            return {}
        return {row[0]: row[1:] for row in rows}

    def run(self):
        description, rate, delay, rule, capacity = PROFILES[self.name]
        self.lab.set_rate(rate)
        self.lab.restore(rule)
        logs = os.path.join(self.dir, "logs")
        os.makedirs(logs)
        serve = self.spawn(
            [self.tool("jetbridge-aggregator"), "--home", self.ground, "serve", "--data",
             "tcp://127.0.0.1:%d" % SERVE_PORTS[0], "--acks", "tcp://127.0.0.1:%d" % SERVE_PORTS[1]],
            GROUND_NS, os.path.join(logs, "serve.log"))
        for listen, target in zip(RELAY_PORTS, SERVE_PORTS):
            self.spawn([sys.executable, os.path.abspath(__file__), "relay", GROUND_IP, listen, "127.0.0.1", target,
                        delay], GROUND_NS, os.path.join(logs, "relay-%d.log" % listen))
        deadline = time.monotonic() + 20
        while not os.path.exists(os.path.join(self.ground, "jetbridge.sqlite")) or not self._listening():
            if time.monotonic() > deadline or serve.poll() is not None:
                raise RuntimeError("serve or the relay did not start; see " + logs)
            time.sleep(0.05)
        total = self.args.devices * self.args.records
        start = time.monotonic()
        acks = {device: [] for device in self.devices}
        agents = {
            device: self.spawn([self.tool("jetbridge-agent"), "--home", os.path.join(self.dir, device), "sync",
                                "--until-drained", "--timeout", self.args.timeout], DEV_NS,
                               os.path.join(logs, device + ".log"), acks=acks[device])
            for device in self.devices}
        exits, ended = {}, {}
        returns = []  # times the link came back
        cut_at = None
        link_down = False
        next_flap = start + 2 if self.name == "flap" else None
        flap_until = start + 60
        while len(exits) < len(agents):
            now = time.monotonic()
            counts = self.stored()
            stored = sum(c[1] for c in counts.values())
            acked = sum(n for d in self.devices for _, n in list(acks[d]))
            if self.name == "cut30" and cut_at is None and acked >= total // 2:
                self.lab.cut()
                cut_at, link_down = now, True
            if self.name == "cut30" and link_down and now - cut_at >= 30:
                self.lab.restore()
                link_down = False
                returns.append(now)
            if next_flap is not None and now >= next_flap:
                if link_down:
                    self.lab.restore()
                    returns.append(now)
                    link_down = False
                    next_flap = now + 5 if now < flap_until else None
                else:
                    self.lab.cut()
                    link_down = True
                    next_flap = now + 5
            for device, process in agents.items():
                if device not in exits and process.poll() is not None:
                    exits[device] = process.returncode
                    ended[device] = now
            if now - start > float(self.args.timeout) + 30:
                break
            time.sleep(0.05)
        if link_down:
            self.lab.restore()
        elapsed = max(ended.values(), default=time.monotonic()) - start
        counts = self.stored()
        resent = sent = 0
        for device in self.devices:
            text = open(os.path.join(logs, device + ".log")).read()
            match = re.search(r"in ([\d,]+) batches \(([\d,]+) resent\)", text)
            if match:
                sent += int(match.group(1).replace(",", ""))
                resent += int(match.group(2).replace(",", ""))
        report = self.aggregator("report", "flights", "--format", "json").stdout
        flights = json.loads(report)["flights"]
        departed = sum(f["bags"]["departed"] for f in flights)
        new = sum(c[1] for c in counts.values())
        result = {
            "profile": self.name, "description": description,
            "exact": new == total and departed == total and all(code == 0 for code in exits.values())
            and len(exits) == len(agents),
            "elapsed": elapsed, "goodput": self.payload / elapsed if elapsed > 0 else 0, "capacity": capacity,
            "batches": sent, "resent": resent, "duplicates": sum(c[2] for c in counts.values()),
            "exits": exits,
        }
        if returns:
            back = returns[-1]
            # Devices still syncing when the link last came back.
            pending = [d for d in self.devices if ended.get(d, float("inf")) > back]
            # Of those, the ones with records still unacknowledged: a device whose records were all acknowledged
            # before the return waits only for its flight's confirmation, and has no new ack to wait for.
            unacked = [d for d in pending if sum(n for t, n in acks[d] if t < back) < self.args.records]
            first = {d: min((t for t, _ in acks[d] if t >= back), default=float("inf")) for d in unacked}
            result["first_ack"] = max((first[d] - back for d in unacked), default=None)
            result["drained"] = max((ended.get(d, float("inf")) - back for d in pending), default=None)
            result["returns"] = len(returns)
        if cut_at is not None:
            result["unacked_at_cut"] = total - sum(n for d in self.devices for t, n in acks[d] if t < cut_at)
        self.stop()
        return result

    def _listening(self):
        out = sh("ss", "-ltn", ns=GROUND_NS, check=False).stdout
        return all(":%d " % port in out for port in RELAY_PORTS + SERVE_PORTS)

    def stop(self):
        for process in reversed(self.processes):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes = []


def seconds(value):
    if value is None:
        return "-"
    if value == float("inf"):
        return "never"
    return "%.1f s" % value


def table(results):
    header = ("profile", "exact", "time", "goodput", "of link", "batches", "resent", "dups stored",
              "first ack after return", "drained after return")
    rows = []
    for r in results:
        goodput = "%.0f kB/s" % (r["goodput"] / 1000)
        share = "%.0f%%" % (100 * r["goodput"] / r["capacity"]) if r["capacity"] else "-"
        dups = str(r["duplicates"])
        if "unacked_at_cut" in r:
            dups += " (unacked at cut %d)" % r["unacked_at_cut"]
        rows.append((r["description"], "yes" if r["exact"] else "NO", seconds(r["elapsed"]), goodput, share,
                     str(r["batches"]), str(r["resent"]), dups, seconds(r.get("first_ack")),
                     seconds(r.get("drained"))))
    widths = [max(len(str(row[i])) for row in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def targets(results):
    """Issue 17's targets, checked on what was measured (reported, never a failure: timing depends on the machine)."""
    by_name = {r["profile"]: r for r in results}
    lines = []

    def check(text, ok):
        lines.append("target: %-70s %s" % (text, "met" if ok else "NOT MET"))

    if "cut30" in by_name:
        r = by_name["cut30"]
        check("30 s cut: every device's first new ack within 2 s of the link's return",
              r.get("first_ack") is not None and r["first_ack"] <= 2)
        check("30 s cut: every device drained within 5 s of it", r.get("drained") is not None and r["drained"] <= 5)
        check("30 s cut: duplicates stored <= records unacknowledged at the cut",
              r["duplicates"] <= r.get("unacked_at_cut", 0))
    if "slow" in by_name:
        r = by_name["slow"]
        check("1 Mbit/s + 300 ms: resends < 5%% of batches (%d of %d)" % (r["resent"], r["batches"]),
              r["resent"] < 0.05 * max(1, r["batches"] - r["resent"]))
        check("1 Mbit/s + 300 ms: goodput >= 80%% of the link (%.0f%%)" % (100 * r["goodput"] / r["capacity"]),
              r["goodput"] >= 0.8 * r["capacity"])
    if "flap" in by_name:
        r = by_name["flap"]
        check("flapping: exact, drained within one ack timeout (30 s) of the last return",
              r["exact"] and r.get("drained") is not None and r["drained"] <= 30)
    return lines


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "relay":
        return relay_main(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.abspath(os.path.join(HERE, "..", ".."))
    default_bin = os.path.join(root, ".build", "release")
    if not os.path.exists(os.path.join(default_bin, "jetbridge-agent")):
        default_bin = os.path.join(root, ".build", "debug")
    parser.add_argument("--bin", default=default_bin, help="directory of jetbridge-agent and jetbridge-aggregator")
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--records", type=int, default=3000, help="bag scans per device")
    parser.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated: " + ", ".join(PROFILES))
    parser.add_argument("--timeout", default="120", help="each agent's sync --timeout")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (logs, homes)")
    args = parser.parse_args()
    ci = os.environ.get("CI") == "true"

    def skip(reason):
        print("SKIP netlab: " + reason)
        if ci:
            print("netlab: CI=true, so a skip is a failure", file=sys.stderr)
            sys.exit(1)
        sys.exit(0)

    for tool in ("ip", "tc", "nft", "ss"):
        if shutil.which(tool) is None:
            skip("%s not found (apt-get install iproute2 nftables)" % tool)
    for tool in ("jetbridge-agent", "jetbridge-aggregator"):
        if not os.path.exists(os.path.join(args.bin, tool)):
            skip("%s not in %s (swift build first, or --bin DIR)" % (tool, args.bin))
    lab = Lab()
    try:
        lab.create()
    except (subprocess.CalledProcessError, OSError) as error:
        lab.close()
        detail = error.stderr.strip() if isinstance(error, subprocess.CalledProcessError) else str(error)
        skip("cannot create network namespaces here (%s)" % detail)
    scratch = tempfile.mkdtemp(prefix="jetbridge-netlab-")
    results = []
    started = time.monotonic()
    try:
        print("netlab: %d devices x %d bag scans, binaries from %s" % (args.devices, args.records, args.bin))
        for name in args.profiles.split(","):
            if name not in PROFILES:
                parser.error("unknown profile " + name)
            run = Run(args, lab, name, scratch)
            run.prepare()
            try:
                result = run.run()
            finally:
                run.stop()
            results.append(result)
            print("  %-28s exact=%s %.1f s" % (result["description"], "yes" if result["exact"] else "NO",
                                              result["elapsed"]), flush=True)
    finally:
        lab.close()
        if args.keep:
            print("netlab: kept " + scratch)
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(table(results))
    print()
    for line in targets(results):
        print(line)
    print("\nnetlab: %.0f s in all" % (time.monotonic() - started))
    if not all(r["exact"] for r in results):
        print("netlab: FAILED: totals not exact in " + ", ".join(r["profile"] for r in results if not r["exact"]))
        sys.exit(1)


if __name__ == "__main__":
    main()
