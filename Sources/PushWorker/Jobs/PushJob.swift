import APNs
import FCM
import Foundation
import Stores

/// A validated push job, as the job contract of the design page defines it.
public struct PushJob: Sendable, Hashable {
    /// What a job does with a device whose user is in their quiet hours.
    public enum QuietHoursMode: String, Sendable, Hashable, CaseIterable {
        /// Hold the device until the window ends, then send it.
        case `defer`
        /// Do not send it: outcome `filtered`, reason `quiet_hours`.
        case drop
        /// Send it all the same (a one-time code, a security alert).
        case ignore
    }

    public enum ResultsMode: String, Sendable, Hashable, CaseIterable {
        /// A result for every device.
        case all
        /// Every device's result, packed: a `results` message per chunk (a few under a size bound).
        /// One broker message per page of devices instead of per device, which is what holds
        /// `all` to the broker's pace.
        case batched
        /// Results only for devices not delivered.
        case failures
        /// Only the summary.
        case none
    }

    /// Who a job reaches: devices (named, or resolved from users, groups or an activity), or one
    /// broadcast channel. A channel stands alone, as the decoder requires: the type cannot hold a
    /// channel with tokens, so no later step has to ask which of the two a job meant.
    public struct Audience: Sendable, Hashable {
        public enum Kind: Sendable, Hashable {
            case devices(Devices)
            /// A broadcast channel (`audience.channel`): the job is one broadcast request, and
            /// APNs reaches the channel's subscribers.
            case channel(String)
        }

        /// The device fields of an audience.
        public struct Devices: Sendable, Hashable {
            public var tokens: [String] = []
            public var users: [String] = []
            public var groups: [String] = []
            /// A chunk or retry job's devices, resolved by the worker that split the job: each
            /// with its user, sent as they are.
            public var devices: [Recipient] = []
            /// A chunk job's devices that preferences filtered out: results without a request.
            public var filtered: [Recipient] = []
            /// A Live Activity (`audience.activity`): every token registered for it.
            public var activity: String?
            /// Android devices named by their FCM registration tokens (`audience.fcm_tokens`).
            public var fcmTokens: [String] = []
        }

        public private(set) var kind: Kind

        public init(tokens: [String] = [], users: [String] = [], groups: [String] = [], devices: [Recipient] = [], filtered: [Recipient] = [],
            activity: String? = nil
        ) {
            kind = .devices(Devices(tokens: tokens, users: users, groups: groups, devices: devices, filtered: filtered, activity: activity))
        }

        /// A broadcast to `channel`, and nothing else.
        public static func channel(_ channel: String) -> Audience {
            var audience = Audience()
            audience.kind = .channel(channel)
            return audience
        }

        /// The broadcast channel; nil for devices.
        public var channel: String? {
            if case .channel(let id) = kind { id } else { nil }
        }

        /// The device fields; empty for a channel.
        private var fields: Devices {
            if case .devices(let devices) = kind { devices } else { Devices() }
        }

        public var tokens: [String] {
            get { fields.tokens }
            set { editDevices { $0.tokens = newValue } }
        }
        public var users: [String] { fields.users }
        public var groups: [String] { fields.groups }
        public var devices: [Recipient] { fields.devices }
        public var filtered: [Recipient] { fields.filtered }
        public var activity: String? { fields.activity }
        public var fcmTokens: [String] {
            get { fields.fcmTokens }
            set { editDevices { $0.fcmTokens = newValue } }
        }

        /// Changes the device fields; a broadcast's audience has none.
        private mutating func editDevices(_ change: (inout Devices) -> Void) {
            guard case .devices(var devices) = kind else { preconditionFailure("a broadcast's audience has no tokens") }
            change(&devices)
            kind = .devices(devices)
        }

        /// Resolved already: a chunk or retry job carrying `(token, user)` pairs.
        public var isResolved: Bool { !devices.isEmpty || !filtered.isEmpty }
    }

    public var id: String
    /// The configured app's name.
    public var app: String
    public var audience: Audience
    public var type: String?
    public var subtype: String?
    /// The payload object, serialised (with a placeholder badge when `badge` counts).
    public var payload: [UInt8]
    /// `aps.badge` asks for each device's counter: the payload is built per device.
    public var badge: BadgeIncrement?
    public var pushType: APNsPushType
    public var priority: APNsPriority?
    public var expiration: APNsExpiration?
    public var collapseID: String?
    public var topic: String?
    public var results: ResultsMode
    public var replyTo: String?
    /// A Live Activity job's event (`live_activity.event`); its `aps` is in `payload`.
    public var liveActivity: LiveActivityEvent?
    /// Where the job's tokens live in the registry: devices, or a Live Activity's tokens (a start
    /// reaches push-to-start tokens; an update or end an activity's). Resolution and the 410
    /// feedback both use it, so a dead activity token is removed where it was registered.
    public var tokenNamespace: TokenNamespace = .devices
    /// The producer's key for "this notification, once": a job whose key the fleet took within
    /// the window is not sent again (its summary names the first job). Never in chunk jobs.
    public var idempotencyKey: String?
    /// When to send it (`send_at`): a job whose time is ahead is held in the schedule and
    /// released by any worker then. Never in chunk jobs.
    public var sendAt: Date?
    /// `local_time`: each device gets the job at this wall-clock time in its own zone. Never in
    /// chunk jobs (their parts are held resolved, by zone).
    public var localTime: LocalTime?
    /// `quiet_hours`; nil: the app's default (`apps[].quiet_hours`, else `defer`).
    public var quietHours: QuietHoursMode?
    /// What Android devices are sent (`notification` and `fcm`, checked against FCM's rules);
    /// nil when the job names neither. The job's priority, expiration and collapse id fill what
    /// `fcm.android` leaves out, as the message goes (`fcmMessage()`).
    public var fcm: FCMMessage?
    /// The job named no payload and reaches Android devices alone: its APNs payload is a stand-in
    /// no device is sent (a streamed body's APNs tokens, unknown to the decoder, are checked for it).
    public var androidOnlyPayload = false

    /// The registry's key for the job's tokens.
    public var registryApp: String { tokenNamespace.registryApp(app) }

    /// One broadcast request to a channel, not a fan-out to devices.
    public var isBroadcast: Bool { audience.channel != nil }

    public init(
        id: String, app: String, audience: Audience, type: String? = nil, subtype: String? = nil, payload: [UInt8],
        pushType: APNsPushType = .alert, priority: APNsPriority? = nil, expiration: APNsExpiration? = nil,
        collapseID: String? = nil, topic: String? = nil, results: ResultsMode = .all, replyTo: String? = nil, badge: BadgeIncrement? = nil
    ) {
        self.badge = badge
        self.id = id
        self.app = app
        self.audience = audience
        self.type = type
        self.subtype = subtype
        self.payload = payload
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.topic = topic
        self.results = results
        self.replyTo = replyTo
    }
}
