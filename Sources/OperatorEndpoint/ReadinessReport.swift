/// The answer to `/readyz`: each check by name, with what is wrong when it fails. Ready when none
/// fails; the body names every check so an operator sees which one holds the pod back.
public struct ReadinessReport: Sendable, Equatable {
    public struct Check: Sendable, Equatable {
        public var name: String
        /// nil when the check passes.
        public var problem: String?
        /// What a passing check found, shown after "ok" (the broker node a connection uses).
        public var detail: String?

        public init(_ name: String, problem: String?, detail: String? = nil) {
            self.name = name
            self.problem = problem
            self.detail = detail
        }

        /// The problem, or "ok" with the detail when there is one.
        var text: String {
            if let problem { return problem }
            return detail.map { "ok: \($0)" } ?? "ok"
        }
    }

    public var checks: [Check]

    public init(_ checks: [Check]) {
        self.checks = checks
    }

    public var isReady: Bool { checks.allSatisfy { $0.problem == nil } }

    /// `{"ready":false,"checks":{"broker":"…","apps":"ok"}}`, in the checks' order; a passing check
    /// with a detail reads "ok: detail".
    public var json: String {
        let entries = checks.map { "\"\(Self.escape($0.name))\":\"\(Self.escape($0.text))\"" }
        return "{\"ready\":\(isReady),\"checks\":{\(entries.joined(separator: ","))}}\n"
    }

    private static func escape(_ text: String) -> String {
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                escaped += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}
