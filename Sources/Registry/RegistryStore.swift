import APNs
import Foundation

/// A device as the registry knows it: its token and the user it is connected to, if any.
public struct RegisteredDevice: Sendable, Hashable {
    public var token: String
    public var user: String?

    public init(token: String, user: String?) {
        self.token = token
        self.user = user
    }
}

/// Users, devices, groups and preferences, behind one protocol so workers on one host share an
/// SQLite file and workers on many hosts a PostgreSQL database, with one conformance suite.
public protocol RegistryStore: Sendable {
    /// Applies one command; idempotent.
    func apply(_ command: RegistryCommand) async throws(RegistryError)

    /// Applies commands in one transaction: all of them, or, when one is refused, none.
    func apply(batch commands: [RegistryCommand]) async throws(RegistryError)

    /// The devices of `app` connected to one of `users` or to a member of one of `groups`, each
    /// once, in token order, handed over in pages of at most `pageSize`: a group of a million
    /// members is never held whole.
    func devices(
        app: String, users: [String], groups: [String], pageSize: Int,
        _ page: ([RegisteredDevice]) async throws -> Void
    ) async throws

    /// The preferences of those of `users` who set any.
    func preferences(of users: Set<String>) async throws(RegistryError) -> [String: NotificationPreferences]

    /// What APNs said of a device: 410 (`Unregistered`, `ExpiredToken`) removes it unless it was
    /// registered again after `timestamp`; `BadDeviceToken` and `DeviceTokenNotForTopic` mark it
    /// invalid so it is not resolved again. Returns whether the device was removed or marked.
    @discardableResult
    func deviceRejected(app: String, token: String, reason: APNsErrorReason, at timestamp: Date?) async throws(RegistryError) -> Bool

    /// The users of those of `tokens` that are registered for `app` and connected: one query for
    /// a job's explicit tokens, not one per token.
    func users(app: String, tokens: [String]) async throws(RegistryError) -> [String: String]

    /// The device, if registered and valid.
    func device(app: String, token: String) async throws(RegistryError) -> RegisteredDevice?
}
