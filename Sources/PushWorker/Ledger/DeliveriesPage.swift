import APNs
import Foundation
import OperatorEndpoint
import Stores
import Synchronization

/// `/deliveries` on the operator endpoint: a small search page over the delivery ledger, by user,
/// token, job or idempotency key, one line per device with its outcome and reason, newest first,
/// a page at a time (its "Older" button asks for the next with the cursor the last answer gave). Off unless
/// `ledger.page_token_env` names a variable holding its bearer token, because it shows device
/// tokens and user ids.
///
/// The page itself (`/deliveries`, `/deliveries/page.js`) holds no data; the script asks
/// `/deliveries/search` with `Authorization: Bearer <token>`, so the token never travels in a URL
/// or a server log, and puts every value in with `textContent`, never as markup.
public final class DeliveriesPage: Sendable {
    private let token: [UInt8]
    /// Set once the worker's ledger is open (the endpoint serves before that).
    private let ledger = Mutex<(any LedgerStore)?>(nil)

    /// Records one search returns at most.
    static let maximumLimit = 1000

    public init(token: String) {
        self.token = Array(token.utf8)
    }

    public func serve(_ ledger: any LedgerStore) {
        self.ledger.withLock { $0 = ledger }
    }

    public func answer(_ request: OperatorEndpoint.PageRequest) async -> OperatorEndpoint.PageResponse {
        switch request.subpath {
        case "", "/":
            return Self.static(Self.html, type: "text/html; charset=utf-8")
        case "/page.js":
            return Self.static(Self.script, type: "text/javascript; charset=utf-8")
        case "/search":
            return await search(request)
        default:
            return Self.json(404, ["error": "not found: /deliveries, /deliveries/search"])
        }
    }

    private func search(_ request: OperatorEndpoint.PageRequest) async -> OperatorEndpoint.PageResponse {
        guard let header = request.authorization, header.hasPrefix("Bearer "), Self.equal(Array(header.utf8.dropFirst(7)), token) else {
            return Self.json(401, ["error": "a bearer token is needed (the value of ledger.page_token_env's variable)"], extra: [("www-authenticate", "Bearer")])
        }
        let named = ["user", "token", "job", "key"].compactMap { name in request.query[name].flatMap { $0.isEmpty ? nil : (name, $0) } }
        guard named.count == 1, let (field, value) = named.first else {
            return Self.json(400, ["error": "search by exactly one of user, token, job and key"])
        }
        var limit = 100
        if let text = request.query["limit"], !text.isEmpty {
            guard let number = Int(text), (1...Self.maximumLimit).contains(number) else {
                return Self.json(400, ["error": "limit must be a whole number from 1 to \(Self.maximumLimit)"])
            }
            limit = number
        }
        var after: DeliveryCursor?
        if let text = request.query["after"], !text.isEmpty {
            guard let cursor = DeliveryCursor(text) else {
                return Self.json(400, ["error": "after must be the next of an earlier answer, as it was given"])
            }
            after = cursor
        }
        guard let ledger = ledger.withLock({ $0 }) else { return Self.json(503, ["error": "the ledger is not open yet"]) }
        let subject: DeliveryQuery.Subject = switch field {
        case "user": .user(value)
        case "token": .token(DevicePlatform.normalized(token: value))
        case "key": .idempotencyKey(value)
        default: .job(value)
        }
        do {
            let page = try await ledger.page(DeliveryQuery(subject, limit: limit, after: after))
            return Self.json(200, ["deliveries": page.records.map(\.json), "next": page.next.map { $0.text as Any } ?? NSNull()])
        } catch {
            return Self.json(503, ["error": "cannot read the ledger: \(error.message)"])
        }
    }

    /// Compares in time independent of where the two differ.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private static let securityHeaders: [(String, String)] = [
        ("cache-control", "no-store"), ("x-content-type-options", "nosniff"), ("referrer-policy", "no-referrer"),
        ("content-security-policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'none'; frame-ancestors 'none'"),
    ]

    private static func `static`(_ text: String, type: String) -> OperatorEndpoint.PageResponse {
        OperatorEndpoint.PageResponse(statusCode: 200, contentType: type, body: Array(text.utf8), headers: securityHeaders)
    }

    private static func json(_ status: Int, _ object: [String: Any], extra: [(String, String)] = []) -> OperatorEndpoint.PageResponse {
        OperatorEndpoint.PageResponse(
            statusCode: status, contentType: "application/json", body: JSONDocument.bytes(object) ?? Array("{}".utf8), headers: securityHeaders + extra)
    }

    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <title>pushworker deliveries</title>
        <style>
          body { font: 14px system-ui, sans-serif; margin: 2em; color: #222; }
          form { display: flex; gap: .5em; flex-wrap: wrap; align-items: end; margin-bottom: 1em; }
          label { display: flex; flex-direction: column; font-size: 12px; color: #555; }
          input, select, button { font: inherit; padding: .3em .5em; }
          table { border-collapse: collapse; width: 100%; }
          th, td { text-align: left; padding: .3em .6em; border-bottom: 1px solid #ddd; font-variant-numeric: tabular-nums; }
          td.token { font-family: monospace; }
          tr.delivered td.outcome { color: #176b2c; } tr.rejected td.outcome, tr.failed td.outcome { color: #a01818; }
          #status { margin: .5em 0; color: #555; } #status.error { color: #a01818; }
        </style>
        </head>
        <body>
        <h1>Deliveries</h1>
        <form id="search">
          <label>Bearer token <input id="bearer" type="password" autocomplete="off" required></label>
          <label>Search by <select id="field"><option value="user">user</option><option value="token">token</option><option value="job">job</option><option value="key">idempotency key</option></select></label>
          <label>Value <input id="value" required></label>
          <label>At most <input id="limit" type="number" min="1" max="1000" value="100"></label>
          <button id="go" type="submit">Search</button>
        </form>
        <div id="status">One line per device, newest first.</div>
        <table id="results" hidden>
          <thead><tr><th>time (UTC)</th><th>job</th><th>device</th><th>platform</th><th>user</th><th>outcome</th><th>status</th><th>reason</th><th>attempts</th></tr></thead>
          <tbody></tbody>
        </table>
        <p><button id="older" type="button" hidden>Older</button></p>
        <script src="/deliveries/page.js"></script>
        </body>
        </html>

        """

    static let script = """
        "use strict";
        const form = document.getElementById("search");
        const status = document.getElementById("status");
        const table = document.getElementById("results");
        const bearer = document.getElementById("bearer");
        const older = document.getElementById("older");
        bearer.value = sessionStorage.getItem("pushworker-deliveries-token") || "";
        // The search the rows come from, and where its next page starts (the answer's next).
        let search = null;
        let next = null;
        let shown = 0;
        function say(text, error) { status.textContent = text; status.className = error ? "error" : ""; }
        async function load(after) {
          const query = new URLSearchParams(search);
          if (after) query.set("after", after);
          say("Searching…", false);
          let answer;
          try {
            const response = await fetch("/deliveries/search?" + query, { headers: { "Authorization": "Bearer " + bearer.value } });
            answer = await response.json();
            if (!response.ok) { table.hidden = true; older.hidden = true; say(answer.error || ("HTTP " + response.status), true); return; }
          } catch (error) { table.hidden = true; older.hidden = true; say("The worker did not answer: " + error, true); return; }
          const body = table.tBodies[0];
          body.replaceChildren();
          for (const record of answer.deliveries) {
            const row = body.insertRow();
            row.className = record.outcome;
            const cells = [new Date(record.at).toISOString().replace("T", " ").replace(".000Z", ""), record.job_id,
              record.channel ? "channel " + record.channel : record.token, record.platform ?? "apns", record.user ?? "–", record.outcome,
              record.status ?? "–", record.reason ?? "–", record.attempts];
            cells.forEach((value, index) => {
              const cell = row.insertCell();
              cell.textContent = String(value);
              if (index === 2) cell.className = "token";
              if (index === 5) cell.className = "outcome";
            });
          }
          const first = after ? shown + 1 : 1;
          shown = (after ? shown : 0) + answer.deliveries.length;
          next = answer.next;
          older.hidden = !next;
          table.hidden = answer.deliveries.length === 0;
          if (answer.deliveries.length === 0) say(after ? "No older deliveries." : "No deliveries found.", false);
          else say((answer.deliveries.length === 1 ? "1 delivery" : answer.deliveries.length + " deliveries") + ", newest first" +
            (after ? " (" + first + " to " + shown + ")" : "") + (next ? "; older ones follow." : "."), false);
        }
        form.addEventListener("submit", (event) => {
          event.preventDefault();
          sessionStorage.setItem("pushworker-deliveries-token", bearer.value);
          search = new URLSearchParams();
          search.set(document.getElementById("field").value, document.getElementById("value").value.trim());
          search.set("limit", document.getElementById("limit").value || "100");
          load(null);
        });
        older.addEventListener("click", () => { if (search && next) load(next); });

        """
}
