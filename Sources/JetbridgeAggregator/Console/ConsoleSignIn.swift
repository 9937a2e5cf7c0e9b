import Foundation
import Logging
import NIOHTTP1
import SystemSupport

/// Who may read the console: a request carries the token (``ConsoleToken``) as `Authorization: Bearer TOKEN` (a
/// script) or in the cookie the sign-in form sets (a browser). Without it an API path is answered 401 with a JSON
/// error and a page is redirected (303) to `/sign-in`, which asks for the token and then sends the browser back to the
/// page it asked for. A wrong token is refused and logged (never its text), at most once per 30 s per client and way
/// (``RepeatedFailure``) so that guessing does not fill the log.
struct ConsoleSignIn: Sendable {
    let token: ConsoleToken
    private let logger: Logger
    private let refusals = Locked([String: RepeatedFailure]())

    /// The cookie's name.
    static let cookieName = "jetbridge_console"
    /// The sign-in page and form's path.
    static let path = "/sign-in"
    /// The most bytes of a request's body the console reads (the sign-in form): a bigger body is answered 413.
    static let maxBodyBytes = 4 << 10

    init(token: ConsoleToken, logger: Logger) {
        self.token = token
        self.logger = logger
    }

    /// Nil when `request` carries the token; else the answer that refuses it (401 for `/api/…`, 303 to the sign-in
    /// page for the rest).
    func refusal(_ request: MetricsServer.Request) -> MetricsServer.Response? {
        var offered: (way: String, value: Substring)?
        if let field = request.headers.first(name: "Authorization") {
            let parts = field.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" {
                offered = ("bearer", parts[1].drop { $0 == " " })
            } else {
                offered = ("authorization", "")
            }
        } else if let cookie = Self.cookie(in: request.headers) {
            offered = ("cookie", cookie)
        }
        if let offered {
            if token.matches(offered.value.utf8) { return nil }
            refused(offered.way, client: request.client, path: request.path)
        }
        if request.path.hasPrefix("/api/") {
            let message =
                offered == nil
                ? "sign in: send the console's token as 'Authorization: Bearer TOKEN' (docs/AGGREGATOR.md, \"Console\")"
                : "the console's token is wrong"
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
            return Self.form(next: Self.safeNext(request.query["next"]), wrong: false)
        case .POST:
            let fields = MetricsServer.Request(method: .GET, uri: "/?" + String(decoding: request.body, as: UTF8.self))
                .query
            let next = Self.safeNext(fields["next"])
            guard let offered = fields["token"], token.matches(offered.utf8) else {
                refused("sign-in form", client: request.client, path: request.path)
                return Self.form(next: next, wrong: true)
            }
            var cookie = "\(Self.cookieName)=\(offered); Path=/; HttpOnly; SameSite=Strict"
            // The console itself is plain HTTP, where a browser would drop a Secure cookie; behind a proxy that ends
            // TLS (and says so) it is kept to HTTPS.
            if request.headers.first(name: "X-Forwarded-Proto")?.lowercased() == "https" { cookie += "; Secure" }
            var response = Self.redirect(to: next)
            response.headers.append(("Set-Cookie", cookie))
            return response
        default:
            return .init(status: .methodNotAllowed, body: "the sign-in page takes GET and POST only\n")
        }
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

    /// The token in the console's cookie, if the request has one.
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
    static func form(next: String, wrong: Bool) -> MetricsServer.Response {
        let nonce = ConsolePage.nonce()
        let escaped = next.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "\"", with: "&quot;")
            .replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
        let message =
            wrong
            ? #"<p id="wrong" class="wrong">That token is wrong.</p>"#
            : #"<p class="muted">The token is in the aggregator's home, <code>console.token</code>.</p>"#
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
