import APNs
import Foundation

/// A device as the registry knows it: its token, the user it is connected to, and that user's
/// preferences (nil when the user set none, or the device is connected to nobody).
public struct RegisteredDevice: Sendable, Hashable {
    public var token: String
    public var user: String?
    public var preferences: NotificationPreferences?
    /// The service the device is reached through.
    public var platform: DevicePlatform

    public init(token: String, user: String?, preferences: NotificationPreferences? = nil, platform: DevicePlatform = .apns) {
        self.token = token
        self.user = user
        self.preferences = preferences
        self.platform = platform
    }
}

/// Users, devices, groups and preferences, behind one protocol so workers on one host share an
/// SQLite file and workers on many hosts a PostgreSQL database, with one conformance suite.
public protocol RegistryStore: Sendable {
    /// Applies commands in one transaction: all of them, or, when one is refused, none.
    func apply(batch commands: [RegistryCommand]) async throws(StoreError)

    /// Reads the devices of `app` connected to one of `users` or to a member of one of `groups`
    /// (valid ones, each once, with their users' preferences) in one snapshot: the count `body`
    /// reads is the number of devices its pages then hand over, whatever commands run meanwhile.
    /// A group of a million members is read page by page, never held whole.
    func withAudience(
        app: String, users: [String], groups: [String], _ body: (any RegistryAudience) async throws -> Void
    ) async throws

    /// Every valid device of `app` (a registry app key, typically an activity's namespace), each
    /// with its user and preferences, in one snapshot, page by page like `withAudience`: the
    /// audience of an update or end job naming a Live Activity. A device with no user comes with
    /// its own preferences, as `devices(app:tokens:)` gives them.
    func withAllDevices(app: String, _ body: (any RegistryAudience) async throws -> Void) async throws

    /// Those of `tokens` that are registered for `app`, valid and connected, with their users and
    /// preferences: one query for a page of a job's explicit tokens, not one per token.
    func devices(app: String, tokens: [String]) async throws(StoreError) -> [String: RegisteredDevice]

    /// What APNs said of a device: 410 (`Unregistered`, `ExpiredToken`) removes it unless it was
    /// registered again after `timestamp`; `BadDeviceToken` and `DeviceTokenNotForTopic` mark it
    /// invalid so it is not resolved again. Returns whether the device was removed or marked.
    @discardableResult
    func deviceRejected(app: String, token: String, reason: APNsErrorReason, at timestamp: Date?) async throws(StoreError) -> Bool

    /// The device, if registered and valid.
    func device(app: String, token: String) async throws(StoreError) -> RegisteredDevice?

    /// Adds `amount` to the badge counter of each of `tokens` registered (and valid) for `app`,
    /// once per job: a device whose counter `job` already raised keeps it (a retry round, a
    /// redelivered chunk). One statement, so increments from workers at once are all kept.
    /// Returns the counts reached, by token; an unregistered token is absent.
    func incrementBadges(app: String, tokens: [String], by amount: Int, job: String) async throws(StoreError) -> [String: Int]

    /// The device's badge counter; nil when it is not registered.
    func badgeCount(app: String, token: String) async throws(StoreError) -> Int?

    /// The preferences kept at `scope` itself (not those that apply through another): nil when
    /// none are set or the user is unknown; `unknown_device` for a device that is not registered.
    func preferences(_ scope: PreferenceScope) async throws(StoreError) -> NotificationPreferences?

    /// What decides when the devices among `tokens` of `app` may be sent to: each one's time zone
    /// (its own, else its user's) and its user's quiet hours (those for `preferencesApp`, else the
    /// user's for every app). Only devices with one or the other are in the answer.
    func timing(app: String, tokens: [String], preferencesApp: String) async throws(StoreError) -> [String: DeviceTiming]

    /// The time zone and quiet hours kept at `scope` itself (a user; a user for one app: quiet
    /// hours only; a device: its zone only); `unknown_device` for a device that is not registered.
    func timing(_ scope: PreferenceScope) async throws(StoreError) -> DeviceTiming

    /// A user's devices, groups and preferences, for operators; nil if the registry has no such user.
    func user(_ id: String) async throws(StoreError) -> RegisteredUser?

    /// A group's size, devices per app and its first `sampleSize` members (in name order), for
    /// operators; nil if there is no such group.
    func group(_ name: String, sampleSize: Int) async throws(StoreError) -> RegisteredGroup?
}

/// One snapshot of an audience, valid inside `RegistryStore.withAudience` (or `withAllDevices`) only.
public protocol RegistryAudience {
    /// The devices it reaches.
    func count() async throws -> Int

    /// How many of `tokens` it reaches: a job that also names them explicitly sends them once.
    func count(among tokens: [String]) async throws -> Int

    /// `RegistryStore.devices(app:tokens:)` on the audience's own connection: a resolution holds
    /// one connection and never waits for a second, so jobs in hand cannot exhaust a pool.
    func devices(tokens: [String]) async throws -> [String: RegisteredDevice]

    /// Its devices, each once, in pages of at most `size`.
    func pages(size: Int, _ page: ([RegisteredDevice]) async throws -> Void) async throws
}

/// What `pushworker registry show user` prints.
public struct RegisteredUser: Sendable, Hashable {
    public struct Device: Sendable, Hashable {
        /// The app's name (for a Live Activity token, the app it belongs to, not its registry key).
        public var app: String
        public var token: String
        /// APNs called the token bad for this app (`BadDeviceToken`, `DeviceTokenNotForTopic`).
        public var invalid: Bool
        /// An ordinary device token, or a Live Activity's (push-to-start, one activity's).
        public var namespace: TokenNamespace

        public init(app: String, token: String, invalid: Bool, namespace: TokenNamespace = .devices) {
            self.app = app
            self.token = token
            self.invalid = invalid
            self.namespace = namespace
        }

        /// A device as a store keeps it, under its registry app key.
        public init(registryApp: String, token: String, invalid: Bool) {
            let (app, namespace) = TokenNamespace.parse(registryApp)
            self.init(app: app, token: token, invalid: invalid, namespace: namespace)
        }
    }

    public var id: String
    public var devices: [Device]
    public var groups: [String]
    public var preferences: NotificationPreferences

    public init(id: String, devices: [Device], groups: [String], preferences: NotificationPreferences) {
        self.id = id
        self.devices = devices
        self.groups = groups
        self.preferences = preferences
    }
}

/// What `pushworker registry show group` prints.
public struct RegisteredGroup: Sendable, Hashable {
    public var name: String
    public var members: Int
    /// Valid devices of the members, by app.
    public var devicesByApp: [String: Int]
    public var sample: [String]

    public init(name: String, members: Int, devicesByApp: [String: Int], sample: [String]) {
        self.name = name
        self.members = members
        self.devicesByApp = devicesByApp
        self.sample = sample
    }
}

extension RegistryStore {
    /// Applies one command, a batch of one; idempotent.
    public func apply(_ command: RegistryCommand) async throws(StoreError) {
        try await apply(batch: [command])
    }
}

/// A device's time zone and its user's quiet hours, as the registry keeps them.
public struct DeviceTiming: Sendable, Hashable {
    /// An IANA zone name; nil: none kept (the app's default applies).
    public var zone: String?
    public var quietHours: QuietHours?

    public init(zone: String? = nil, quietHours: QuietHours? = nil) {
        self.zone = zone
        self.quietHours = quietHours
    }
}
