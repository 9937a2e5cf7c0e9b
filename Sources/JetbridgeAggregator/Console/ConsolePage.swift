import Foundation
import NIOHTTP1

/// One of the console's pages: the same self-contained HTML document for each (inline CSS and script, no external
/// asset), which draws the page its path names from that page's JSON endpoint and polls it every few seconds.
///
/// Colours mean one thing everywhere: red is missing (and rejected, and an error), green is arrived, grey is in
/// transit or checked. Bars are per flight (a flight's bags are its own 100 %), and revenue is shown per currency,
/// never added across currencies. Ids and timestamps never wrap.
struct ConsolePage {
    enum Kind: String {
        case flights, flight, devices, bag, receipt
    }

    let kind: Kind

    /// The page at `path`, or `nil` when none is there.
    init?(path: String) {
        switch path {
        case "/", "/flights": kind = .flights
        case "/flight": kind = .flight
        case "/devices": kind = .devices
        case "/bag": kind = .bag
        case "/receipt": kind = .receipt
        default: return nil
        }
    }

    /// How often a page asks for its data again, in milliseconds.
    static let pollMilliseconds = 3_000

    /// A nonce for one page: 18 random bytes, base64.
    static func nonce() -> String {
        var generator = SystemRandomNumberGenerator()
        return Data((0..<18).map { _ in UInt8.random(in: 0...255, using: &generator) }).base64EncodedString()
    }

    /// The Content-Security-Policy of a page whose inline script and style carry `nonce`: nothing else runs, nothing
    /// is fetched but from the console itself, forms post only to it, no frame may hold it.
    static func policy(nonce: String) -> String {
        "default-src 'none'; script-src 'nonce-\(nonce)'; style-src 'nonce-\(nonce)'; connect-src 'self'; "
            + "img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    }

    /// The policy of every answer that is not a page (JSON, redirects, errors): it allows nothing.
    static let closedPolicy = "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

    /// The header fields every console answer carries (a page's own Content-Security-Policy replaces
    /// ``closedPolicy``).
    static func secured(_ response: MetricsServer.Response) -> MetricsServer.Response {
        var response = response
        let defaults = [
            ("Content-Security-Policy", closedPolicy), ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"), ("X-Frame-Options", "DENY"),
        ]
        for (name, value) in defaults where !response.headers.contains(where: { $0.name == name }) {
            response.headers.append((name, value))
        }
        return response
    }

    func response() -> MetricsServer.Response {
        let nonce = Self.nonce()
        let policy = Self.policy(nonce: nonce)
        let body = Self.template
            .replacingOccurrences(of: "{{NONCE}}", with: nonce)
            .replacingOccurrences(of: "{{PAGE}}", with: kind.rawValue)
            .replacingOccurrences(of: "{{POLL}}", with: "\(Self.pollMilliseconds)")
        return .init(
            status: .ok, contentType: "text/html; charset=utf-8", body: body,
            headers: [("Content-Security-Policy", policy)])
    }

    static let template = #"""
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>Jetbridge console</title>
        <style nonce="{{NONCE}}">
        :root { --missing:#c62828; --missing-bg:#fdecea; --arrived:#2e7d32; --arrived-bg:#e8f5e9; --transit:#78909c;
          --ink:#1c2430; --muted:#5f6b7a; --line:#dde3ea; --bg:#f6f8fa; --accent:#1f4e79; }
        * { box-sizing: border-box; }
        body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--ink); background:var(--bg); }
        header { display:flex; align-items:center; gap:24px; padding:10px 20px; background:var(--accent); color:#fff; }
        header b { font-size:16px; letter-spacing:.02em; }
        header nav a { color:#dfe9f5; text-decoration:none; margin-right:16px; }
        header nav a.here { color:#fff; font-weight:600; border-bottom:2px solid #fff; }
        #live { margin-left:auto; font-size:12px; color:#dfe9f5; white-space:nowrap; }
        #live.down { color:#ffcdd2; font-weight:600; }
        .dot { display:inline-block; width:8px; height:8px; border-radius:50%; background:#8bc34a; margin-right:6px; }
        #live.down .dot { background:#ff5252; }
        header form { margin:0; } header form button { background:transparent; color:#dfe9f5; border-color:#8fb0d0; padding:2px 8px; font-size:12px; }
        main { padding:16px 20px; max-width:1400px; }
        h1 { font-size:20px; margin:4px 0 12px; } h2 { font-size:16px; margin:22px 0 8px; }
        table { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line); }
        th, td { padding:6px 10px; border-bottom:1px solid var(--line); text-align:left; vertical-align:middle; }
        th { background:#eef2f6; font-weight:600; font-size:12px; color:var(--muted); white-space:nowrap; }
        td.n, th.n { text-align:right; font-variant-numeric:tabular-nums; }
        .id, .time, .nw { white-space:nowrap; font-variant-numeric:tabular-nums; }
        .mono { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:12.5px; white-space:nowrap; }
        tr.problem td { background:var(--missing-bg); } tr.problem td:first-child { box-shadow: inset 4px 0 var(--missing); }
        .missing { color:var(--missing); font-weight:600; } .arrived { color:var(--arrived); } .transit { color:var(--transit); }
        .muted { color:var(--muted); } .err { color:var(--missing); }
        .bar { display:flex; width:220px; height:12px; border-radius:3px; overflow:hidden; background:#eceff1; }
        .bar span { display:block; height:100%; } .bar .a { background:var(--arrived); } .bar .t { background:var(--transit); }
        .bar .m { background:var(--missing); }
        .rev { height:8px; background:var(--accent); border-radius:2px; min-width:1px; }
        .cards { display:flex; flex-wrap:wrap; gap:12px; margin-bottom:14px; }
        .card { background:#fff; border:1px solid var(--line); border-radius:6px; padding:10px 14px; min-width:150px; }
        .card .k { font-size:12px; color:var(--muted); } .card .v { font-size:20px; font-weight:600; white-space:nowrap; }
        .card.bad { border-color:var(--missing); background:var(--missing-bg); } .card.bad .v { color:var(--missing); }
        .card.good .v { color:var(--arrived); }
        form.filters { display:flex; flex-wrap:wrap; gap:10px; align-items:center; margin-bottom:12px; }
        input, select, button { font:inherit; padding:5px 8px; border:1px solid #b8c2cc; border-radius:4px; background:#fff; }
        button { cursor:pointer; } a { color:var(--accent); }
        .pager { margin:10px 0; display:flex; gap:10px; align-items:center; }
        pre.receipt { background:#fff; border:1px solid var(--line); padding:16px; display:inline-block; min-width:420px; }
        .legend span { margin-right:14px; white-space:nowrap; } .sw { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; vertical-align:-1px; }
        </style>
        </head>
        <body data-page="{{PAGE}}" data-poll="{{POLL}}">
        <header><b>Jetbridge</b>
        <nav><a href="/" id="nav-flights">Flights</a><a href="/devices" id="nav-devices">Devices</a><a href="/bag" id="nav-bag">Bag lookup</a><a href="/receipt" id="nav-receipt">Receipt</a></nav>
        <span id="live"><span class="dot"></span><span id="live-text">connecting…</span></span>
        <form method="post" action="/sign-out"><button type="submit" id="sign-out">Sign out</button></form></header>
        <main id="main"><p class="muted">Loading…</p></main>
        <script nonce="{{NONCE}}">
        "use strict";
        const page = document.body.dataset.page, poll = +document.body.dataset.poll;
        const params = new URLSearchParams(location.search);
        const main = document.getElementById("main");
        const navLink = document.getElementById("nav-" + (page === "flight" ? "flights" : page));
        if (navLink) navLink.className = "here";
        // Every piece of text goes in through textContent: nothing from the store is ever parsed as HTML.
        function el(tag, attrs, ...children) {
          const node = document.createElement(tag);
          for (const [k, v] of Object.entries(attrs || {})) {
            if (v === undefined || v === null) continue;
            if (k === "text") node.textContent = v; else if (k === "cls") node.className = v;
            else if (k === "width") node.style.width = v; else node.setAttribute(k, v);
          }
          for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
          return node;
        }
        const fmt = new Intl.NumberFormat("en-US");
        const n = (x) => fmt.format(x);
        const pct = (part, whole) => whole ? (100 * part / whole).toFixed(1) + " %" : "–";
        function time(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : "–"; }
        function ago(iso, now) {
          if (!iso) return "never";
          let s = Math.max(0, Math.round((Date.parse(now) - Date.parse(iso)) / 1000));
          if (s < 60) return s + " s ago";
          const m = Math.floor(s / 60); if (m < 60) return m + " min ago";
          const h = Math.floor(m / 60); if (h < 48) return h + " h " + (m % 60) + " min ago";
          return Math.floor(h / 24) + " days ago";
        }
        function table(head, rows, numeric) {
          const t = el("table");
          const tr = el("tr"); head.forEach((h, i) => tr.append(el("th", { text: h, cls: numeric && numeric.includes(i) ? "n" : null })));
          t.append(el("thead", {}, tr));
          const body = el("tbody"); rows.forEach((r) => body.append(r)); t.append(body);
          return t;
        }
        function bagBar(b) {
          const bar = el("div", { cls: "bar", title: `arrived ${b.arrived}, in transit ${b.inTransit}, missing ${b.missing}` });
          if (b.total) {
            bar.append(el("span", { cls: "a", width: (100 * b.arrived / b.total) + "%" }));
            bar.append(el("span", { cls: "t", width: (100 * (b.inTransit + b.checked) / b.total) + "%" }));
            bar.append(el("span", { cls: "m", width: (100 * b.missing / b.total) + "%" }));
          }
          return bar;
        }
        function legendLine() {
          const p = el("p", { cls: "legend muted" });
          for (const [c, t] of [["var(--arrived)", "arrived"], ["var(--transit)", "in transit"], ["var(--missing)", "missing"]]) {
            const sw = el("i", { cls: "sw" }); sw.style.background = c; p.append(el("span", {}, sw, t));
          }
          p.append(el("span", { text: "Each flight's bar is that flight's bags (100 %); revenue is per currency, never added across currencies." }));
          return p;
        }
        function card(k, v, cls) { return el("div", { cls: "card " + (cls || "") }, el("div", { cls: "k", text: k }), el("div", { cls: "v", text: v })); }
        // A device's state on a flight (the fleet report's): confirmed is green, silent red, sending grey.
        function fleetCell(s) {
          const cls = s === "confirmed" ? "arrived" : s === "silent" ? "missing" : s === "sending" ? "transit" : "muted";
          return el("td", { cls: cls + " nw", text: s === "not-announced" ? "not announced" : s });
        }
        function statusCell(s) {
          const cls = s === "missing" ? "missing" : s === "arrived" ? "arrived" : "transit";
          return el("td", { cls: cls + " nw", text: s });
        }

        // ---- pages: each returns the URL of its JSON and a function that draws it ----
        const pages = {
          flights() {
            return ["/api/flights?" + params.toString(), (d) => {
              const out = [el("h1", { text: d.date ? `Flights of ${d.date}` : "Flights, today first" })];
              const f = el("form", { cls: "filters", method: "get", action: "/" });
              const dateSel = el("select", { name: "date" }, el("option", { value: "", text: "all dates" }));
              for (const x of d.dates) dateSel.append(el("option", { value: x, text: x === d.today ? x + " (today)" : x }));
              dateSel.value = d.date || "";
              const prob = el("input", { type: "checkbox", name: "problems", value: "1", id: "problems" });
              prob.checked = params.get("problems") === "1";
              f.append(dateSel, el("input", { name: "q", placeholder: "flight contains…", value: params.get("q") || "" }),
                el("label", {}, prob, " problems only"), el("button", { type: "submit", text: "Show" }));
              out.push(f);
              const cards = el("div", { cls: "cards" });
              cards.append(card("flights listed", n(d.matching)));
              for (const c of d.revenueByCurrency) cards.append(card(`revenue ${c.currency} (this page, ${c.flights} flights)`, c.revenueText));
              const missing = d.flights.reduce((s, x) => s + x.bags.missing, 0);
              cards.append(card("missing bags (this page)", n(missing), missing ? "bad" : "good"));
              out.push(cards);
              if (d.note) out.push(el("p", { cls: "muted", text: d.note }));
              // Revenue bars are scaled within one currency: amounts in two currencies are never compared.
              const maxBy = {};
              for (const x of d.flights) if (x.currency) maxBy[x.currency] = Math.max(maxBy[x.currency] || 0, x.revenue);
              const rows = d.flights.map((x) => {
                const b = x.bags;
                const rev = el("td", { cls: "n" }, el("div", { cls: "nw", text: x.error ? "–" : x.revenueText }));
                if (x.currency && !x.error && maxBy[x.currency]) rev.append(el("div", { cls: "rev", width: (100 * x.revenue / maxBy[x.currency]) + "%" }));
                return el("tr", { cls: x.problem ? "problem" : null, "data-flight": x.flight },
                  el("td", { cls: "id" }, el("a", { href: "/flight?flight=" + encodeURIComponent(x.flight), text: x.flight })),
                  el("td", { cls: "n", text: x.devices.length, title: x.devices.join(", ") }),
                  el("td", { cls: "n", text: n(x.fleet.announced) }),
                  el("td", { cls: "n " + (x.fleet.confirmed ? "arrived" : "muted"), text: n(x.fleet.confirmed) }),
                  el("td", { cls: "n transit", text: n(x.fleet.sending) }),
                  el("td", { cls: "n " + (x.fleet.silent ? "missing" : "muted"), text: n(x.fleet.silent) }),
                  el("td", { cls: "n", text: n(x.orders) }),
                  rev,
                  el("td", { cls: "n", text: n(b.total) }),
                  el("td", { cls: "n arrived nw", text: `${n(b.arrived)} (${pct(b.arrived, b.total)})` }),
                  el("td", { cls: "n transit nw", text: `${n(b.inTransit)} (${pct(b.inTransit, b.total)})` }),
                  el("td", { cls: "n nw " + (b.missing ? "missing" : "muted"), text: `${n(b.missing)} (${pct(b.missing, b.total)})` }),
                  el("td", {}, bagBar(b)),
                  el("td", { cls: "err", text: x.error || "" }));
              });
              out.push(table(["Flight", "Devices seen", "Announced", "Confirmed", "Sending", "Silent", "Orders", "Revenue", "Bags", "Arrived", "In transit", "Missing", "", ""], rows, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]));
              out.push(legendLine());
              out.push(pager(d.page, d.pages));
              return out;
            }];
          },
          flight() {
            return ["/api/flight?" + params.toString(), (d) => {
              const s = d.summary, b = s.bags;
              const out = [el("h1", { cls: "id", text: "Flight " + s.flight })];
              const cards = el("div", { cls: "cards" });
              cards.append(card("revenue", s.error ? "–" : s.revenueText), card("orders", n(s.orders)), card("devices seen", n(s.devices.length)),
                card("devices announced", n(s.fleet.announced)), card("confirmed", n(s.fleet.confirmed), s.fleet.confirmed ? "good" : ""),
                card("sending", n(s.fleet.sending)), card("silent", n(s.fleet.silent), s.fleet.silent ? "bad" : ""),
                card("bags checked in", n(b.total)), card("arrived", `${n(b.arrived)} · ${pct(b.arrived, b.total)}`, "good"),
                card("in transit", `${n(b.inTransit)} · ${pct(b.inTransit, b.total)}`),
                card("missing", `${n(b.missing)} · ${pct(b.missing, b.total)}`, b.missing ? "bad" : "good"));
              out.push(cards);
              if (s.error) out.push(el("p", { cls: "err", text: "Sales cannot be totalled: " + s.error }));
              out.push(el("h2", { text: "Devices" }));
              out.push(table(["Device", "State", "Announced", "Orders", "Scans", "Last contact", "Since", "Rejected batches", "Last rejection", "Limited"],
                d.devices.map((x) => el("tr", { cls: x.rejects ? "problem" : null, "data-device": x.device },
                  el("td", { cls: "id mono", text: x.device }), fleetCell(x.fleetState), el("td", { cls: "time", text: x.announcedAt ? time(x.announcedAt) : "" }),
                  el("td", { cls: "n", text: n(x.orders) }), el("td", { cls: "n", text: n(x.scans) }),
                  el("td", { cls: "time", text: time(x.lastContact) }), el("td", { cls: "nw", text: ago(x.lastContact, d.now) }),
                  el("td", { cls: "n " + (x.rejects ? "missing" : "muted"), text: n(x.rejects) }),
                  el("td", { text: x.lastRejectReason ? `${time(x.lastRejectAt)}: ${x.lastRejectReason}` : "" }),
                  el("td", { cls: "n " + (x.limited ? "missing" : "muted"), text: n(x.limited) }))), [3, 4, 7, 9]));
              out.push(el("h2", { text: "Bags" }));
              const f = el("form", { cls: "filters", method: "get", action: "/flight" });
              const sel = el("select", { name: "status" });
              for (const v of ["missing", "in-transit", "arrived", "all"]) sel.append(el("option", { value: v, text: v }));
              sel.value = d.status;
              f.append(el("input", { type: "hidden", name: "flight", value: s.flight }), sel, el("button", { type: "submit", text: "Show" }));
              out.push(f);
              out.push(table(["Tag id", "Owner", "Weight (lb)", "Status", "Last scan", "Where", "By"],
                d.bags.map((x) => el("tr", { cls: x.status === "missing" ? "problem" : null },
                  el("td", { cls: "mono" }, el("a", { href: "/bag?tag=" + x.tag, text: x.tag })), el("td", { cls: "nw", text: x.owner + (x.ownerConflict ? " (owners differ)" : "") }),
                  el("td", { cls: "n", text: x.weight.toFixed(1) }), statusCell(x.status), el("td", { cls: "time", text: time(x.lastScanAt) }),
                  el("td", { text: x.lastPoint || "" }), el("td", { cls: "mono", text: x.lastDevice || "" }))), [2]));
              if (!d.bags.length) out.push(el("p", { cls: "muted", text: "No bags with this status." }));
              const pg = el("div", { cls: "pager" });
              if (d.after) pg.append(el("a", { href: "/flight?" + new URLSearchParams({ flight: s.flight, status: d.status }), text: "« first page" }));
              if (d.next) pg.append(el("a", { href: "/flight?" + new URLSearchParams({ flight: s.flight, status: d.status, after: d.next }), text: "next page »" }));
              out.push(pg);
              out.push(el("h2", { text: "Items sold" }));
              out.push(table(["Item", "Count", "Revenue " + (s.currency || "")], s.items.map((x) =>
                el("tr", {}, el("td", { text: x.name }), el("td", { cls: "n", text: n(x.count) }), el("td", { cls: "n", text: x.revenueText }))), [1, 2]));
              const rf = el("form", { cls: "filters", method: "get", action: "/receipt" });
              rf.append(el("input", { type: "hidden", name: "flight", value: s.flight }), el("input", { name: "seat", placeholder: "seat, e.g. 17B" }), el("button", { type: "submit", text: "Show receipt" }));
              out.push(el("h2", { text: "A seat's receipt" }), rf);
              return out;
            }];
          },
          devices() {
            return ["/api/devices", (d) => {
              const out = [el("h1", { text: "Devices" })];
              if (d.allowListError) out.push(el("p", { cls: "err", text: "The allow list cannot be read: " + d.allowListError }));
              out.push(table(["Device", "Last seen", "Since", "Batches", "Records", "New", "Duplicates", "Rejected", "Last rejection", "Limited", "Allow list"],
                d.devices.map((x) => el("tr", { cls: x.rejects || (x.allowed === false && !d.allowListError) ? "problem" : null, "data-device": x.device },
                  el("td", { cls: "id mono", text: x.device }), el("td", { cls: "time", text: time(x.lastSync) }), el("td", { cls: "nw", text: ago(x.lastSync, d.now) }),
                  el("td", { cls: "n", text: n(x.batches) }), el("td", { cls: "n", text: n(x.records) }), el("td", { cls: "n", text: n(x.new) }),
                  el("td", { cls: "n", text: n(x.duplicates) }), el("td", { cls: "n " + (x.rejects ? "missing" : "muted"), text: n(x.rejects) }),
                  el("td", { text: x.lastRejectReason ? `${time(x.lastRejectAt)}: ${x.lastRejectReason}` : "" }),
                  el("td", { cls: "n " + (x.limited ? "missing" : "muted"), text: n(x.limited) }),
                  d.insecure ? el("td", { cls: "muted", text: "none (insecure mode)" })
                    : d.allowListError ? el("td", { cls: "muted", text: "unknown" })
                    : el("td", { cls: x.allowed ? "arrived" : "missing", text: x.allowed ? "allowed" : "revoked" }))), [3, 4, 5, 6, 7, 9]));
              return out;
            }];
          },
          bag() {
            const tag = params.get("tag") || "";
            const f = el("form", { cls: "filters", method: "get", action: "/bag" });
            f.append(el("input", { name: "tag", size: "40", placeholder: "tag id, e.g. 7C4E2A10-…", value: tag }), el("button", { type: "submit", text: "Look up" }));
            const lead = () => [el("h1", { text: "Bag lookup" }), f];
            if (!tag) return [null, lead];
            return ["/api/bag?" + params.toString(), (d) => {
              const out = [el("h1", { text: "Bag lookup" }), f];
              if (!d.bags.length) { out.push(el("p", { cls: "muted", text: "No bag with tag id " + d.tag + "." })); return out; }
              out.push(table(["Flight", "Tag id", "Owner", "Weight (lb)", "Status", "Departed", "Arrived", "Last scan", "Where", "By"],
                d.bags.map((x) => el("tr", { cls: x.status === "missing" ? "problem" : null },
                  el("td", { cls: "id" }, el("a", { href: "/flight?flight=" + encodeURIComponent(x.flight), text: x.flight })),
                  el("td", { cls: "mono", text: x.tag }), el("td", { cls: "nw", text: x.owner }), el("td", { cls: "n", text: x.weight.toFixed(1) }),
                  statusCell(x.status), el("td", { cls: "time", text: time(x.departedAt) }), el("td", { cls: "time", text: time(x.arrivedAt) }),
                  el("td", { cls: "time", text: time(x.lastScanAt) }), el("td", { text: x.lastPoint || "" }), el("td", { cls: "mono", text: x.lastDevice || "" }))), [3]));
              return out;
            }, lead];
          },
          receipt() {
            const f = el("form", { cls: "filters", method: "get", action: "/receipt" });
            f.append(el("input", { name: "flight", placeholder: "flight, e.g. ZA101/2026-11-21", value: params.get("flight") || "" }),
              el("input", { name: "seat", placeholder: "seat, e.g. 17B", value: params.get("seat") || "" }), el("button", { type: "submit", text: "Show" }));
            const lead = () => [el("h1", { text: "Receipt" }), f];
            if (!params.get("flight") || !params.get("seat")) return [null, lead];
            return ["/api/receipt?" + params.toString(), (d) => {
              const out = [el("h1", { cls: "id", text: `Receipt ${d.flight} seat ${d.seat}` }), f];
              if (d.error) out.push(el("p", { cls: "err", text: "No receipt can be made: " + d.error }));
              else if (!d.text) out.push(el("p", { cls: "muted", text: "This seat has no orders." }));
              else out.push(el("pre", { cls: "receipt", text: d.text }));
              return out;
            }, lead];
          },
        };
        function pager(p, pages) {
          const pg = el("div", { cls: "pager" });
          const link = (to, t) => { const q = new URLSearchParams(params); q.set("page", to); return el("a", { href: "?" + q, text: t }); };
          if (p > 1) pg.append(link(p - 1, "« previous"));
          pg.append(el("span", { cls: "muted", text: `page ${p} of ${pages}` }));
          if (p < pages) pg.append(link(p + 1, "next »"));
          return pg;
        }
        // `lead`: what a page shows above an answer it could not get as asked (its heading and form), when it has one.
        const [url, draw, lead] = (pages[page] || pages.flights)();
        const live = document.getElementById("live"), liveText = document.getElementById("live-text");
        let focused = null;
        async function refresh() {
          if (!url) { main.replaceChildren(...draw()); live.className = ""; liveText.textContent = "ready"; return; }
          try {
            const r = await fetch(url, { headers: { Accept: "application/json" }, cache: "no-store" });
            // Signed out (the session ended: signed out elsewhere, 12 hours old, or serve restarted): the sign-in
            // page, then back here.
            if (r.status === 401) { location.assign("/sign-in?next=" + encodeURIComponent(location.pathname + location.search)); return; }
            // A refusal's body may not be JSON (a proxy's page): its status still says what happened. An answer that
            // says it is fine must be JSON; one that is not reads as the aggregator not reached.
            const d = r.ok ? await r.json() : await r.json().catch(() => ({}));
            if (!r.ok) {
              // The aggregator answered: not "cannot reach". 400, the question as asked has no answer (a bad tag, a
              // flight that is no flight): said on the page, not asked again until the operator changes it. 503 and
              // the rest: the store cannot answer now, asked again.
              const why = d.error || "HTTP " + r.status;
              live.className = "down";
              if (r.status === 400) {
                liveText.textContent = "cannot show this: " + why;
                // A page without a form of its own (the board's filters, a flight's) links back to the board.
                main.replaceChildren(...(lead ? lead() : []), el("p", { cls: "err", text: "Cannot show this: " + why }),
                  ...(lead ? [] : [el("p", {}, el("a", { href: "/", text: "Back to the flights" }))]));
                clearInterval(timer);
              } else {
                liveText.textContent = "the aggregator cannot answer now (" + why + "); retrying";
              }
              return;
            }
            // Keep what the operator is typing: redraw only when no form field has focus.
            const active = document.activeElement;
            if (!(active && main.contains(active) && /INPUT|SELECT/.test(active.tagName))) main.replaceChildren(...draw(d).filter((x) => x));
            live.className = ""; liveText.textContent = "live · updated " + new Date().toISOString().slice(11, 19) + " UTC";
            document.body.dataset.updated = String(Date.now());
          } catch (e) {
            live.className = "down"; liveText.textContent = "cannot reach the aggregator (" + e.message + "); retrying";
          }
        }
        let timer;
        refresh();
        if (url) timer = setInterval(refresh, poll);
        </script>
        </body>
        </html>
        """#
}
