import APNs
import FCM
import Foundation

/// The typed fields of a registry command or query, with errors that name them.
struct RegistryFields {
    let object: [String: Any]
    init(_ object: [String: Any]) { self.object = object }

    /// The body as one JSON object.
    static func object(json body: [UInt8]) throws(StoreError) -> [String: Any] {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw StoreError(.invalidJSON, "a registry command must be one JSON object, such as {\"command\": \"register_device\", \"app\": \"news\", \"token\": \"…\"}")
        }
        return object
    }

    /// Refuses a field `name` does not take: a misspelt one is an error, not a silent default.
    func allow(_ allowed: Set<String>, in name: String) throws(StoreError) {
        // `auth`: a user's token, which any command may carry (checked when registry.auth is on).
        if let unknown = object.keys.filter({ $0 != "command" && $0 != "auth" && !allowed.contains($0) }).sorted().first {
            throw StoreError(.invalidField, field: unknown, "\(unknown) is not a field of \(name) (expected \(allowed.sorted().joined(separator: ", ")))")
        }
    }

    func optionalString(_ key: String) throws(StoreError) -> String? {
        guard let value = object[key], !JSONValue.isNull(value) else { return nil }
        guard let text = value as? String else { throw StoreError(.invalidField, field: key, "\(key) must be a string") }
        guard !text.isEmpty else { throw StoreError(.invalidField, field: key, "\(key) is empty") }
        guard text.utf8.count <= 256 else { throw StoreError(.invalidField, field: key, "\(key) is \(text.utf8.count) bytes; at most 256") }
        // PostgreSQL cannot store it, and no name needs it.
        guard !text.utf8.contains(0) else { throw StoreError(.invalidField, field: key, "\(key) contains a NUL character") }
        return text
    }

    func string(_ key: String) throws(StoreError) -> String {
        guard let text = try optionalString(key) else { throw StoreError(.missingField, field: key, "\(key) is missing") }
        return text
    }

    /// An app's name: a string with no `#`, which separates an app from the namespace of its Live
    /// Activity tokens (`news#push-to-start`); a command cannot reach those through `app`.
    func optionalApp(_ key: String = "app") throws(StoreError) -> String? {
        guard let app = try optionalString(key) else { return nil }
        guard !app.contains(TokenNamespace.separator) else {
            throw StoreError(.invalidField, field: key, "\(key) '\(app)' contains '#', which no app name has: the registry keeps Live Activity tokens under '<app>#…'")
        }
        return app
    }

    func app(_ key: String = "app") throws(StoreError) -> String {
        guard let app = try optionalApp(key) else { throw StoreError(.missingField, field: key, "\(key) is missing") }
        return app
    }

    /// A Live Activity's id, as the app names it: non-empty, at most 128 bytes, no NUL.
    func activity(_ key: String = "activity") throws(StoreError) -> String {
        guard let value = object[key], !JSONValue.isNull(value) else { throw StoreError(.missingField, field: key, "\(key) is missing") }
        guard let id = value as? String else { throw StoreError(.invalidField, field: key, "\(key) must be a string: the Live Activity's id") }
        guard !id.isEmpty else { throw StoreError(.invalidField, field: key, "\(key) is empty") }
        guard id.utf8.count <= TokenNamespace.maximumActivityIDLength else {
            throw StoreError(.invalidField, field: key, "\(key) is \(id.utf8.count) bytes; at most \(TokenNamespace.maximumActivityIDLength)")
        }
        guard !id.utf8.contains(0) else { throw StoreError(.invalidField, field: key, "\(key) contains a NUL character") }
        return id
    }

    /// A device's token and its platform: `platform` (`apns`, the default, or `fcm`) when the
    /// command names it, else told by the token's form (an FCM registration token has a colon
    /// or letters past f; an APNs token is hex). Each platform's token is checked in its form.
    func deviceToken(_ key: String = "token") throws(StoreError) -> (token: String, platform: DevicePlatform) {
        let raw = try string(key)
        let named = try optionalString("platform")
        let platform: DevicePlatform
        if let named {
            guard let chosen = DevicePlatform(rawValue: named) else {
                throw StoreError(.invalidField, field: "platform", "platform '\(named)' is not apns or fcm")
            }
            platform = chosen
        } else {
            platform = FCMRegistrationToken.problem(raw) == nil ? .fcm : .apns
        }
        switch platform {
        case .apns: return (try apnsToken(key), .apns)
        case .fcm:
            if let problem = FCMRegistrationToken.problem(raw) { throw StoreError(.invalidField, field: key, "\(key) \(problem)") }
            return (raw, .fcm)
        }
    }

    /// A registered device's token, of either platform: an FCM registration token as it is (case
    /// matters in it), else an APNs token normalised and checked (`apnsToken`).
    func token(_ key: String = "token") throws(StoreError) -> String {
        let raw = try string(key)
        return FCMRegistrationToken.problem(raw) == nil ? raw : try apnsToken(key)
    }

    /// An APNs device token, normalised and checked as the job decoder does (`<3F1C 0E5D …>` as apps
    /// log it is the token `3f1c0e5d…`).
    func apnsToken(_ key: String = "token") throws(StoreError) -> String {
        let token = APNsDeviceToken.normalized(try string(key))
        do { try APNsDeviceToken.validate(token, field: key) } catch {
            throw StoreError(.invalidField, field: key, "\(key): \(error.message)")
        }
        return token
    }

    /// A user (`user`, with `app` for one app's preferences), or a device with no user (`app` and
    /// `token`).
    func scope() throws(StoreError) -> PreferenceScope {
        let user = try optionalString("user")
        let app = try optionalApp()
        if let value = object["token"], !JSONValue.isNull(value) {
            guard user == nil else {
                throw StoreError(.invalidField, field: "token", "token: name a user, or a device by app and token, not both")
            }
            guard let app else { throw StoreError(.missingField, field: "app", "app is missing: a device is named by app and token") }
            return .device(app: app, token: try token())
        }
        guard let user else { throw StoreError(.missingField, field: "user", "user is missing (or name a device with no user by app and token)") }
        return app.map { .userApp(user, app: $0) } ?? .user(user)
    }

    /// A list entry: `"type"` with optional `"exceptions": [subtype, …]`, or the array form
    /// `"entry": [type, subtype, …]`.
    func entry() throws(StoreError) -> (type: String, exceptions: [String]) {
        if let value = object["entry"], !JSONValue.isNull(value) {
            guard object["type"] == nil && object["exceptions"] == nil else {
                throw StoreError(.invalidField, field: "entry", "entry: give entry, or type and exceptions, not both")
            }
            guard let items = value as? [Any], let strings = items as? [String], let type = strings.first, strings.count == items.count else {
                throw StoreError(.invalidField, field: "entry", "entry must be [type, subtype, …]: a non-empty list of strings")
            }
            guard !type.isEmpty else { throw StoreError(.invalidField, field: "entry", "entry's type is empty") }
            return (type, Array(strings.dropFirst()))
        }
        let type = try string("type")
        guard let value = object["exceptions"], !JSONValue.isNull(value) else { return (type, []) }
        guard let items = value as? [Any], let strings = items as? [String], strings.count == items.count else {
            throw StoreError(.invalidField, field: "exceptions", "exceptions must be a list of subtype strings")
        }
        return (type, strings)
    }

    func bool(_ key: String) throws(StoreError) -> Bool? {
        guard let value = object[key], !JSONValue.isNull(value) else { return nil }
        guard let number = JSONValue.number(value), JSONValue.isBoolean(number) else {
            throw StoreError(.invalidField, field: key, "\(key) must be true or false")
        }
        return number.boolValue
    }

    /// `{"type": ["subtype", …]}`; absent means empty.
    func exceptions(_ key: String) throws(StoreError) -> [String: [String]] {
        guard let value = object[key], !JSONValue.isNull(value) else { return [:] }
        guard let map = value as? [String: Any] else {
            throw StoreError(.invalidField, field: key, "\(key) must map types to lists of exception subtypes, such as {\"grades\": [\"final-grade\"]}")
        }
        var result: [String: [String]] = [:]
        for (type, list) in map {
            guard let subtypes = list as? [Any], subtypes.allSatisfy({ $0 is String }) else {
                throw StoreError(.invalidField, field: "\(key).\(type)", "\(key).\(type) must be a list of subtype strings")
            }
            result[type] = subtypes.compactMap { $0 as? String }
        }
        return result
    }
}
