#!/usr/bin/env bash
# Checks the packages deploy/package.sh made, from outside: exits 1 naming every check that failed.
#   Tests/package/check-package.sh [--install] [DIR]        (DIR: where the packages are, default .build/packages)
# Without --install, reads the files only: the control fields; the files the .deb holds (binaries, units, conffiles,
# demo, docs) and their modes; that the units' ExecStart, Documentation and backtracer paths are in the package; that
# no binary loads a Swift library (ldd) and that each runs `--version` with this machine's Swift toolchain hidden (root:
# a private mount namespace); the tarball's layout and that its binaries are the .deb's.
# With --install (root, a throwaway machine such as CI; refused when jetbridge is already installed): `apt-get install`
# the .deb, checks the user, the homes and `--version` of the installed tools, `systemd-analyze verify` of the units,
# runs the installed demo (/usr/share/jetbridge/demo.sh) to its PASS line, then `apt-get remove` (data and
# configuration kept) and `apt-get purge` (a home with data in it kept and named; empty ones removed; the user kept),
# and removes what it made itself (a file in the kept home; the user, when it was not there before).
set -euo pipefail
install=no
if [ "${1:-}" = --install ]; then install=yes; shift; fi
if [ -n "${1:-}" ]; then dir=$(cd "$1" && pwd); else dir=$(cd "$(dirname "$0")/../.." && pwd)/.build/packages; fi
cd "$(dirname "$0")/../.."
version=$(sed -n 's/^ *public static let release = "\([^"]*\)".*/\1/p' Sources/JetbridgeProtocol/JetbridgeVersion.swift)
arch=$(dpkg --print-architecture)
deb=$dir/jetbridge_${version}_${arch}.deb
tarball=$dir/jetbridge-$version-linux-$(uname -m).tar.gz
products=(jetbridge-agent jetbridge-aggregator jetbridge-queue)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
for f in "$deb" "$tarball"; do
    [ -f "$f" ] || { echo "check-package: no $f (run deploy/package.sh first)" >&2; exit 66; }
done
work=$(mktemp -d -t jetbridge-check-package.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== $deb"
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = jetbridge ] && pass "Package: jetbridge" || fail "Package is '$(field Package)', not jetbridge"
[ "$(field Version)" = "$version" ] && pass "Version: $version (JetbridgeVersion.release)" \
    || fail "Version is '$(field Version)', JetbridgeVersion.release is $version"
[ "$(field Architecture)" = "$arch" ] && pass "Architecture: $arch" || fail "Architecture is '$(field Architecture)'"
depends=$(field Depends)
for dep in adduser curl libzmq5 libsqlite3-0 libc6; do
    [[ ", $depends," == *", $dep "* || ", $depends," == *", $dep,"* ]] && pass "Depends on $dep" \
        || fail "Depends ($depends) lacks $dep"
done
[[ $depends == *libswift* || $depends == *swiftlang* ]] && fail "Depends names Swift: $depends"
[ -n "$(field Maintainer)" ] && pass "Maintainer: $(field Maintainer)" || fail "no Maintainer"
[ -n "$(field Description)" ] && pass "Description" || fail "no Description"

dpkg-deb -c "$deb" > "$work/contents"
has() { # has MODE PATH: the .deb holds PATH (./-relative) with permissions MODE, owned by root
    if grep -qE "^$1 root/root .* \\./${2#/}\$" "$work/contents"; then pass "$1 $2"; else fail "no $2 with mode $1 owned by root"; fi
}
for product in "${products[@]}"; do has -rwxr-xr-x "/usr/bin/$product"; done
has -rwxr-xr-x /usr/libexec/jetbridge/swift-backtrace
for unit in jetbridge-aggregator.service jetbridge-agent-sync.service; do has -rw-r--r-- "/lib/systemd/system/$unit"; done
for conf in agent.json aggregator.json aggregator-shared.json Inventory.plist; do has -rw-r--r-- "/etc/jetbridge/$conf"; done
has -rwxr-xr-x /usr/share/jetbridge/demo.sh
has -rw-r--r-- /usr/share/jetbridge/capture-functions.sh
has -rw-r--r-- /usr/share/jetbridge/systemd/shared-store.conf
for file in prometheus/alerts.yml prometheus/alerts.test.yml grafana/jetbridge.json; do
    has -rw-r--r-- "/usr/share/jetbridge/$file"
done
for doc in copyright changelog.gz README.md docs/AGENT.md docs/AGGREGATOR.md docs/EXIT-CODES.md \
    licenses/swift/LICENSE.txt licenses/swift-nio/LICENSE.txt licenses/GRDB.swift/LICENSE; do
    has -rw-r--r-- "/usr/share/doc/jetbridge/$doc"
done
grep -E '\./var/|\./home/|\./usr/local/|\./opt/' "$work/contents" && fail "files outside /usr, /etc and /lib (above)"
ctrl=$work/DEBIAN
dpkg-deb -e "$deb" "$ctrl"
expected_conffiles=$(printf '/etc/jetbridge/%s\n' Inventory.plist agent.json aggregator-shared.json aggregator.json)
[ "$(sort "$ctrl/conffiles")" = "$expected_conffiles" ] && pass "conffiles: the four files in /etc/jetbridge" \
    || fail "conffiles are: $(tr '\n' ' ' < "$ctrl/conffiles")"
for script in postinst prerm postrm; do
    [ -x "$ctrl/$script" ] && sh -n "$ctrl/$script" && pass "$script" || fail "$script missing, not executable or not sh"
done
grep -E '(systemctl|deb-systemd-helper|deb-systemd-invoke) +(--[a-z]+ +)*(enable|start|restart|reload)\b' "$ctrl/postinst" \
    && fail "the postinst enables or starts a unit (above)"

root=$work/root
dpkg-deb -x "$deb" "$root"
# Every path a unit runs or names must be in the package.
for unit in "$root"/lib/systemd/system/*.service "$root/usr/share/jetbridge/systemd/shared-store.conf"; do
    for path in $(grep -hoE '^(ExecStart|ExecStartPost|ExecReload)=[^ ]+' "$unit" | cut -d= -f2 | grep '^/usr') \
        $(grep -hoE 'file://[^ ]+' "$unit" | sed 's|^file://||') \
        $(grep -hoE 'swift-backtrace=[^ ,]+' "$unit" | cut -d= -f2); do
        [ -e "$root$path" ] && pass "$(basename "$unit") names $path, in the package" \
            || fail "$(basename "$unit") names $path, which the package lacks"
    done
done
grep -v '^#' "$root"/lib/systemd/system/*.service | grep /usr/local && fail "a unit runs or names /usr/local (above)"

# No Swift at run time: nothing from a Swift toolchain in ldd, every library found, and --version runs with the
# toolchain hidden (a tmpfs over it in a private mount namespace; root only).
toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v swift 2>/dev/null || echo /nonexistent/bin/swift)")")")
for binary in "${products[@]/#/$root/usr/bin/}" "$root/usr/libexec/jetbridge/swift-backtrace"; do
    name=${binary#"$root"}
    libs=$(ldd "$binary" 2>&1)
    if grep -E 'libswift|libFoundation|lib_Foundation|libdispatch|libBlocksRuntime|libicu|not found' <<<"$libs"; then
        fail "$name loads the libraries above"
    else
        pass "$name: no Swift library (needs $(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '))"
    fi
done
if [ "$(id -u)" = 0 ] && [ -d "$toolchain" ] && command -v unshare >/dev/null; then
    for product in "${products[@]}"; do
        out=$(unshare -m sh -c 'mount -t tmpfs none "$1" && "$2" --version' sh "$toolchain" "$root/usr/bin/$product" 2>&1) \
            && [ "$out" = "$product $version (wire protocol 1, queue format 1)" ] \
            && pass "$product --version with $toolchain hidden: $out" \
            || fail "$product --version with $toolchain hidden printed: $out"
    done
else
    echo "skip: --version with the Swift toolchain hidden (needs root, unshare and a toolchain to hide)"
fi

echo "== $tarball"
tar -tzvf "$tarball" > "$work/tar-contents"
top=jetbridge-$version
for path in "${products[@]/#/bin/}" libexec/swift-backtrace config/agent.json config/aggregator.json \
    config/aggregator-shared.json config/Inventory.plist systemd/jetbridge-aggregator.service \
    systemd/jetbridge-agent-sync.service systemd/jetbridge-aggregator.service.d/shared-store.conf demo/demo.sh \
    demo/capture-functions.sh prometheus/alerts.yml prometheus/alerts.test.yml grafana/jetbridge.json docs/README.md \
    docs/copyright docs/docs/AGENT.md; do
    grep -qE " $top/$path\$" "$work/tar-contents" && pass "$top/$path" || fail "the tarball lacks $top/$path"
done
tar -xzf "$tarball" -C "$work"
for product in "${products[@]}"; do
    cmp -s "$work/$top/bin/$product" "$root/usr/bin/$product" && pass "bin/$product is the .deb's" \
        || fail "bin/$product differs from the .deb's /usr/bin/$product"
done

if [ "$install" = yes ]; then
    echo "== install, demo, remove, purge"
    [ "$(id -u)" = 0 ] || { echo "check-package: --install needs root" >&2; exit 77; }
    if dpkg -s jetbridge >/dev/null 2>&1; then
        echo "check-package: jetbridge is installed on this machine already; --install is for a throwaway machine" \
            "(there: apt-get purge jetbridge, then run this again)" >&2
        exit 69
    fi
    had_user=$(getent passwd jetbridge || true)
    start=$(date +%s%N)
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$(readlink -f "$deb")" > "$work/install.log" 2>&1 \
        && pass "apt-get install ./$(basename "$deb") ($(( ($(date +%s%N) - start) / 1000000 )) ms)" \
        || { cat "$work/install.log"; fail "apt-get install"; }
    for product in "${products[@]}"; do
        out=$("/usr/bin/$product" --version 2>&1) && [ "$out" = "$product $version (wire protocol 1, queue format 1)" ] \
            && pass "installed $product --version: $out" || fail "installed $product --version printed: $out"
    done
    [ "$(id -u jetbridge 2>/dev/null)" ] && [ "$(getent passwd jetbridge | cut -d: -f6)" = /var/lib/jetbridge ] \
        && pass "system user jetbridge, home /var/lib/jetbridge" || fail "no system user jetbridge with home /var/lib/jetbridge"
    for home in /var/lib/jetbridge/agent /var/lib/jetbridge/aggregator; do
        [ "$(stat -c '%a %U %G' "$home" 2>/dev/null)" = "700 jetbridge jetbridge" ] && pass "$home 0700 jetbridge" \
            || fail "$home is '$(stat -c '%a %U %G' "$home" 2>&1)', not 700 jetbridge jetbridge"
    done
    # The units work with the installed paths: the user's tools run on the homes the units name.
    out=$(runuser -u jetbridge -- /usr/bin/jetbridge-aggregator --config /etc/jetbridge/aggregator.json \
        --home /var/lib/jetbridge/aggregator devices list 2>&1) && pass "jetbridge-aggregator as jetbridge on its home" \
        || fail "jetbridge-aggregator as jetbridge on /var/lib/jetbridge/aggregator: $out"
    out=$(runuser -u jetbridge -- /usr/bin/jetbridge-agent --config /etc/jetbridge/agent.json \
        --home /var/lib/jetbridge/agent status 2>&1) && pass "jetbridge-agent as jetbridge on its home and /etc config" \
        || fail "jetbridge-agent as jetbridge on /var/lib/jetbridge/agent with /etc/jetbridge/agent.json: $out"
    if command -v systemd-analyze >/dev/null; then
        out=$(systemd-analyze verify /lib/systemd/system/jetbridge-aggregator.service \
            /lib/systemd/system/jetbridge-agent-sync.service 2>&1) && [ -z "$out" ] \
            && pass "systemd-analyze verify: both units" || fail "systemd-analyze verify: $out"
    else
        echo "skip: systemd-analyze is not installed"
    fi
    log=$work/demo.log
    if DEMO_DIR=$work/demo /usr/share/jetbridge/demo.sh > "$log" 2>&1 && tail -n 2 "$log" | grep -q '^PASS: '; then
        pass "the installed demo: $(grep '^== using' "$log"); $(grep '^PASS: ' "$log" | cut -c1-40)…"
    else
        cat "$log"
        fail "the installed demo (/usr/share/jetbridge/demo.sh) did not end with PASS"
    fi
    apt-get remove -y -qq jetbridge > "$work/remove.log" 2>&1 || { cat "$work/remove.log"; fail "apt-get remove"; }
    [ ! -e /usr/bin/jetbridge-agent ] && [ -f /etc/jetbridge/agent.json ] && [ -d /var/lib/jetbridge/aggregator ] \
        && pass "apt-get remove: binaries gone; /etc/jetbridge and the homes kept" \
        || fail "apt-get remove: /usr/bin/jetbridge-agent $([ -e /usr/bin/jetbridge-agent ] && echo present || echo gone), /etc/jetbridge/agent.json $([ -f /etc/jetbridge/agent.json ] && echo kept || echo gone), homes $([ -d /var/lib/jetbridge/aggregator ] && echo kept || echo gone)"
    # Data in the aggregator's home: purge must keep that home, say so, and remove the empty agent home.
    marker=/var/lib/jetbridge/aggregator/check-package-marker
    [ -d /var/lib/jetbridge/aggregator ] && touch "$marker"
    apt-get purge -y -qq jetbridge > "$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "apt-get purge"; }
    [ ! -e /etc/jetbridge ] && [ ! -e /var/lib/jetbridge/agent ] && [ -f "$marker" ] \
        && grep -q 'kept /var/lib/jetbridge/aggregator' "$work/purge.log" \
        && pass "apt-get purge: /etc/jetbridge and the empty agent home removed; the aggregator home with data kept and named" \
        || { cat "$work/purge.log"; ls -la /etc/jetbridge /var/lib/jetbridge 2>&1; fail "apt-get purge"; }
    getent passwd jetbridge >/dev/null && pass "apt-get purge: the user jetbridge kept" || fail "apt-get purge removed the user"
    # What this check made: the marker, and so the home and /var/lib/jetbridge the purge had to keep; the user, which the
    # package keeps, when it was not there before.
    rm -f "$marker"
    rmdir /var/lib/jetbridge/aggregator /var/lib/jetbridge 2>/dev/null || true
    [ -n "$had_user" ] || deluser --system --quiet jetbridge >/dev/null 2>&1 || true
fi

echo
if [ "$failures" = 0 ]; then echo "PASS: the packages hold what they should"; else echo "FAIL: $failures check(s) failed"; exit 1; fi
