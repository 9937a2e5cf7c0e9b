import Foundation
import Logging
import NIOHTTP1
import SystemSupport

/// Who may read the console: a request carries the token (``ConsoleToken``) as `Authorization: Bearer TOKEN` (a
/// script), or the cookie of a session the sign-in form started (a browser; ``ConsoleSessions``: the cookie holds a
/// random session id, never the token). Without either an API path is answered 401 with a JSON error and a page is
/// redirected (303) to `/sign-in`, which asks for the token and then sends the browser back to the page it asked for;
/// `POST /sign-out` ends the browser's session and clears its cookie. A wrong token is refused and logged (never its
/// text), at most once per 30 s per client and way (``RepeatedFailure``) so that guessing does not fill the log.
struct ConsoleSignIn: Sendable {
    let token: ConsoleToken
    /// The browsers' sessions: in memory, so a restart of `serve` ends them all.
    let sessions: ConsoleSessions
    private let logger: Logger
    private let refusals = Locked([String: RepeatedFailure]())

    /// The cookie's name.
    static let cookieName = "jetbridge_console"
    /// The sign-in page and form's path.
    static let path = "/sign-in"
    /// The sign-out form's path (`POST` only).
    static let signOutPath = "/sign-out"
    /// The most bytes of a request's body the console reads (the sign-in form): a bigger body is answered 413.
    static let maxBodyBytes = 4 << 10

    init(token: ConsoleToken, sessions: ConsoleSessions = ConsoleSessions(), logger: Logger) {
        self.token = token
        self.sessions = sessions
        self.logger = logger
    }

    /// Nil when `request` carries the token or the cookie of a session that has not ended; else the answer that
    /// refuses it (401 for `/api/…`, 303 to the sign-in page for the rest).
    func refusal(_ request: MetricsServer.Request) -> MetricsServer.Response? {
        var offered: (way: String, value: Substring)?
        if let field = request.headers.first(name: "Authorization") {
            let parts = field.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" {
                offered = ("bearer", parts[1].drop { $0 == " " })
            } else {
                offered = ("authorization", "")
            }
        }
        // Another scheme (`Basic`, from a proxy in front that asks for its own password and passes the header on)
        // is not ours: the session cookie decides. Before, any such header hid the cookie, so behind nginx's
        // `auth_basic` every page after signing in went back to the sign-in page.
        if offered?.way != "bearer", let cookie = Self.cookie(in: request.headers) {
            offered = ("cookie", cookie)
        }
        if let offered {
            if offered.way == "cookie" {
                // A session id, not the token: an unknown one is a session that ended (signed out, 12 hours old,
                // pushed out, or `serve` restarted), not a guess worth a warning.
                if sessions.isActive(offered.value) { return nil }
            } else {
                if token.matches(offered.value.utf8) { return nil }
                refused(offered.way, client: request.client, path: request.path)
            }
        }
        if request.path.hasPrefix("/api/") {
            let message =
                switch offered?.way {
                case nil:
                    "sign in: send the console's token as 'Authorization: Bearer TOKEN' (docs/AGGREGATOR.md, \"Console\")"
                case "cookie": "the console's session has ended (signed out, expired or serve restarted): sign in again"
                default: "the console's token is wrong"
                }
            var response = ConsoleAPI.json(.unauthorized, ConsoleAPI.Failure(error: message))
            response.headers.append(("WWW-Authenticate", "Bearer realm=\"jetbridge console\""))
            return response
        }
        return Self.redirect(to: Self.path + "?next=" + Self.percentEncoded(request.uri))
    }

    /// `GET /sign-in`: the form; `POST /sign-in`: checks the token in its body (`token=…&next=…`), sets the cookie and
    /// sends the browser on to `next`, or shows the form again, 401, saying the token was wrong.
    func answer(_ request: MetricsServer.Request) -> MetricsServer.Response {
        switch request.method {
        case .GET, .HEAD:
            return Self.form(
                next: Self.safeNext(request.query["next"]), wrong: false, signedOut: request.query["signed-out"] == "1")
        case .POST:
            let fields = MetricsServer.Request(method: .GET, uri: "/?" + String(decoding: request.body, as: UTF8.self))
                .query
            let next = Self.safeNext(fields["next"])
            guard let offered = fields["token"], token.matches(offered.utf8) else {
                refused("sign-in form", client: request.client, path: request.path)
                return Self.form(next: next, wrong: true)
            }
            let session = sessions.begin()
            logger.info("console: signed in", metadata: ["client": "\(request.client)"])
            var response = Self.redirect(to: next)
            response.headers.append(("Set-Cookie", Self.cookie(session, request)))
            return response
        default:
            return .init(
                status: .methodNotAllowed, body: "the sign-in page takes GET and POST only\n",
                headers: [("Allow", "GET, HEAD, POST")])
        }
    }

    /// `POST /sign-out`: ends the session the cookie names (if any), clears the cookie and sends the browser to the
    /// sign-in form. Needs no token: it can only end a session, and `SameSite=Strict` keeps another site's form from
    /// sending the cookie.
    func signOut(_ request: MetricsServer.Request) -> MetricsServer.Response {
        guard request.method == .POST else {
            return .init(
                status: .methodNotAllowed, body: "sign out with POST /sign-out (the Sign out button of every page)\n",
                headers: [("Allow", "POST")])
        }
        if let session = Self.cookie(in: request.headers) {
            sessions.end(session)
            logger.info("console: signed out", metadata: ["client": "\(request.client)"])
        }
        var response = Self.redirect(to: Self.path + "?signed-out=1")
        response.headers.append(("Set-Cookie", Self.cookie("", request, clear: true)))
        return response
    }

    /// The `Set-Cookie` value carrying `session` (or clearing the cookie).
    private static func cookie(_ session: String, _ request: MetricsServer.Request, clear: Bool = false) -> String {
        var cookie = "\(cookieName)=\(session); Path=/; HttpOnly; SameSite=Strict"
        if clear { cookie += "; Max-Age=0" }
        // The console itself is plain HTTP, where a browser would drop a Secure cookie; behind a proxy that ends TLS
        // (and says so) it is kept to HTTPS.
        if request.headers.first(name: "X-Forwarded-Proto")?.lowercased() == "https" { cookie += "; Secure" }
        return cookie
    }

    private func refused(_ way: String, client: String, path: String) {
        let host = client.split(separator: ":").dropLast().joined(separator: ":")
        let decision = refusals.withLock { refusals in
            // Bounded: a flood from many addresses keeps at most 1,000 of them.
            if refusals.count > 1_000 { refusals.removeAll() }
            return refusals["\(way) \(host)", default: RepeatedFailure()].failed(way)
        }
        switch decision {
        case .log:
            logger.warning(
                "console: wrong token refused", metadata: ["client": "\(client)", "way": "\(way)", "path": "\(path)"])
        case .summary(let count):
            logger.warning(
                "console: wrong tokens still refused",
                metadata: ["client": "\(client)", "way": "\(way)", "timesSinceLastLine": "\(count)"])
        case .quiet: break
        }
    }

    /// The session id in the console's cookie, if the request has one.
    static func cookie(in headers: HTTPHeaders) -> Substring? {
        for field in headers[canonicalForm: "Cookie"] {
            for pair in field.split(separator: ";") {
                let trimmed = pair.drop { $0 == " " }
                if trimmed.hasPrefix(cookieName + "=") { return trimmed.dropFirst(cookieName.count + 1) }
            }
        }
        return nil
    }

    /// `next` if it is a path of this console (one `/`, not `//host`, no backslash), else `/`: the form never sends a
    /// browser elsewhere.
    static func safeNext(_ next: String?) -> String {
        guard let next, next.hasPrefix("/"), !next.hasPrefix("//"), !next.contains("\\"),
            !next.hasPrefix(path), next.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
        else { return "/" }
        return next
    }

    static func redirect(to location: String) -> MetricsServer.Response {
        .init(status: .seeOther, body: "see \(location)\n", headers: [("Location", location)])
    }

    static func percentEncoded(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "/-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? "/"
    }

    /// The sign-in page: a form with no script, its style allowed by a nonce.
    static func form(next: String, wrong: Bool, signedOut: Bool = false) -> MetricsServer.Response {
        let nonce = ConsolePage.nonce()
        let escaped = next.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        let message =
            wrong
            ? #"<p id="wrong" class="wrong">That token is wrong.</p>"#
            : (signedOut ? #"<p id="signed-out">You are signed out.</p>"# : "")
                + #"<p class="muted">The token is in the aggregator's home, <code>console.token</code>.</p>"#
        let body = #"""
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Jetbridge console · sign in</title>
            <style nonce="\#(nonce)">
            body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:#1c2430; background:#f6f8fa; }
            header { padding:10px 20px; background:#1f4e79; color:#fff; font-weight:600; font-size:16px; }
            main { padding:24px 20px; max-width:480px; }
            input, button { font:inherit; padding:6px 8px; border:1px solid #b8c2cc; border-radius:4px; background:#fff; }
            input { width:100%; box-sizing:border-box; margin:6px 0 12px; } button { cursor:pointer; }
            .muted { color:#5f6b7a; } .wrong { color:#c62828; font-weight:600; }
            </style>
            </head>
            <body>
            <header>Jetbridge</header>
            <main>
            <h1>Sign in</h1>
            \#(message)
            <form method="post" action="/sign-in">
            <input type="hidden" name="next" value="\#(escaped)">
            <label for="token">Console token</label>
            <input type="password" id="token" name="token" autocomplete="current-password" autofocus required>
            <button type="submit" id="sign-in">Sign in</button>
            </form>
            </main>
            </body>
            </html>
            """#
        return .init(
            status: wrong ? .unauthorized : .ok, contentType: "text/html; charset=utf-8", body: body,
            headers: [("Content-Security-Policy", ConsolePage.policy(nonce: nonce))])
    }
}
