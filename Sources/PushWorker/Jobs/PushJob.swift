import APNs
import FCM
import CopyOnWrite
import Foundation
import Stores

/// A validated push job, as the job contract of the design page defines it.
public struct PushJob: Sendable, Hashable, CustomReflectable {
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

        /// One or the other, never both (`channel(_:)` makes the only audience with a channel).
        /// Held as two fields, not as a `Kind`: a read of one field of an enum's payload copied
        /// the whole payload, seven arrays and strings retained and released, and a job reads
        /// its audience's fields many times.
        private var deviceFields = Devices()
        private var channelID: String?

        public var kind: Kind {
            channelID.map(Kind.channel) ?? .devices(deviceFields)
        }

        public init(tokens: [String] = [], users: [String] = [], groups: [String] = [], devices: [Recipient] = [], filtered: [Recipient] = [],
            activity: String? = nil
        ) {
            deviceFields = Devices(tokens: tokens, users: users, groups: groups, devices: devices, filtered: filtered, activity: activity)
        }

        /// A broadcast to `channel`, and nothing else.
        public static func channel(_ channel: String) -> Audience {
            var audience = Audience()
            audience.channelID = channel
            return audience
        }

        /// The broadcast channel; nil for devices.
        public var channel: String? { channelID }

        public var tokens: [String] {
            get { deviceFields.tokens }
            set { editDevices { $0.tokens = newValue } }
        }
        public var users: [String] { deviceFields.users }
        public var groups: [String] { deviceFields.groups }
        public var devices: [Recipient] { deviceFields.devices }
        public var filtered: [Recipient] { deviceFields.filtered }
        public var activity: String? { deviceFields.activity }
        public var fcmTokens: [String] {
            get { deviceFields.fcmTokens }
            set { editDevices { $0.fcmTokens = newValue } }
        }

        /// Changes the device fields; a broadcast's audience has none.
        private mutating func editDevices(_ change: (inout Devices) -> Void) {
            precondition(channelID == nil, "a broadcast's audience has no tokens")
            change(&deviceFields)
        }

        /// Resolved already: a chunk or retry job carrying `(token, user)` pairs.
        public var isResolved: Bool { !devices.isEmpty || !filtered.isEmpty }
    }

    /// The job's fields, held once however many hands hold the job: a pipeline passes a job
    /// through its stages, its processor and its results, and each copy of twenty-odd strings,
    /// arrays and optionals retained and released them all. Copied on a write while shared.
    private struct Fields: Sendable, Hashable {
        var id: String
        var app: String
        var audience: Audience
        var type: String?
        var subtype: String?
        var payload: [UInt8]
        var badge: BadgeIncrement?
        var pushType: APNsPushType
        var priority: APNsPriority?
        var expiration: APNsExpiration?
        var collapseID: String?
        var topic: String?
        var results: ResultsMode
        var replyTo: String?
        var liveActivity: LiveActivityEvent?
        var tokenNamespace: TokenNamespace = .devices
        var idempotencyKey: String?
        var sendAt: Date?
        var localTime: LocalTime?
        var quietHours: QuietHoursMode?
        var fcm: FCMMessage?
        var androidOnlyPayload: Bool = false
    }

    private var fields: CopyOnWrite<Fields>

    /// Printed and reflected as its fields, as before they moved into the box.
    public var customMirror: Mirror { Mirror(reflecting: fields.value) }

    public var id: String {
        _read { yield fields.value.id }
        _modify { yield &fields.value.id }
    }
    /// The configured app's name.
    public var app: String {
        _read { yield fields.value.app }
        _modify { yield &fields.value.app }
    }
    public var audience: Audience {
        _read { yield fields.value.audience }
        _modify { yield &fields.value.audience }
    }
    public var type: String? {
        _read { yield fields.value.type }
        _modify { yield &fields.value.type }
    }
    public var subtype: String? {
        _read { yield fields.value.subtype }
        _modify { yield &fields.value.subtype }
    }
    /// The payload object, serialised (with a placeholder badge when `badge` counts).
    public var payload: [UInt8] {
        _read { yield fields.value.payload }
        _modify { yield &fields.value.payload }
    }
    /// `aps.badge` asks for each device's counter: the payload is built per device.
    public var badge: BadgeIncrement? {
        _read { yield fields.value.badge }
        _modify { yield &fields.value.badge }
    }
    public var pushType: APNsPushType {
        _read { yield fields.value.pushType }
        _modify { yield &fields.value.pushType }
    }
    public var priority: APNsPriority? {
        _read { yield fields.value.priority }
        _modify { yield &fields.value.priority }
    }
    public var expiration: APNsExpiration? {
        _read { yield fields.value.expiration }
        _modify { yield &fields.value.expiration }
    }
    public var collapseID: String? {
        _read { yield fields.value.collapseID }
        _modify { yield &fields.value.collapseID }
    }
    public var topic: String? {
        _read { yield fields.value.topic }
        _modify { yield &fields.value.topic }
    }
    public var results: ResultsMode {
        _read { yield fields.value.results }
        _modify { yield &fields.value.results }
    }
    public var replyTo: String? {
        _read { yield fields.value.replyTo }
        _modify { yield &fields.value.replyTo }
    }
    /// A Live Activity job's event (`live_activity.event`); its `aps` is in `payload`.
    public var liveActivity: LiveActivityEvent? {
        _read { yield fields.value.liveActivity }
        _modify { yield &fields.value.liveActivity }
    }
    /// Where the job's tokens live in the registry: devices, or a Live Activity's tokens (a start
    /// reaches push-to-start tokens; an update or end an activity's). Resolution and the 410
    /// feedback both use it, so a dead activity token is removed where it was registered.
    public var tokenNamespace: TokenNamespace {
        _read { yield fields.value.tokenNamespace }
        _modify { yield &fields.value.tokenNamespace }
    }
    /// The producer's key for "this notification, once": a job whose key the fleet took within
    /// the window is not sent again (its summary names the first job). Never in chunk jobs.
    public var idempotencyKey: String? {
        _read { yield fields.value.idempotencyKey }
        _modify { yield &fields.value.idempotencyKey }
    }
    /// When to send it (`send_at`): a job whose time is ahead is held in the schedule and
    /// released by any worker then. Never in chunk jobs.
    public var sendAt: Date? {
        _read { yield fields.value.sendAt }
        _modify { yield &fields.value.sendAt }
    }
    /// `local_time`: each device gets the job at this wall-clock time in its own zone. Never in
    /// chunk jobs (their parts are held resolved, by zone).
    public var localTime: LocalTime? {
        _read { yield fields.value.localTime }
        _modify { yield &fields.value.localTime }
    }
    /// `quiet_hours`; nil: the app's default (`apps[].quiet_hours`, else `defer`).
    public var quietHours: QuietHoursMode? {
        _read { yield fields.value.quietHours }
        _modify { yield &fields.value.quietHours }
    }
    /// What Android devices are sent (`notification` and `fcm`, checked against FCM's rules);
    /// nil when the job names neither. The job's priority, expiration and collapse id fill what
    /// `fcm.android` leaves out, as the message goes (`fcmMessage()`).
    public var fcm: FCMMessage? {
        _read { yield fields.value.fcm }
        _modify { yield &fields.value.fcm }
    }
    /// The job named no payload and reaches Android devices alone: its APNs payload is a stand-in
    /// no device is sent (a streamed body's APNs tokens, unknown to the decoder, are checked for it).
    public var androidOnlyPayload: Bool {
        _read { yield fields.value.androidOnlyPayload }
        _modify { yield &fields.value.androidOnlyPayload }
    }

    /// The registry's key for the job's tokens.
    public var registryApp: String { tokenNamespace.registryApp(app) }

    /// One broadcast request to a channel, not a fan-out to devices.
    public var isBroadcast: Bool { audience.channel != nil }

    public init(
        id: String, app: String, audience: Audience, type: String? = nil, subtype: String? = nil, payload: [UInt8],
        pushType: APNsPushType = .alert, priority: APNsPriority? = nil, expiration: APNsExpiration? = nil,
        collapseID: String? = nil, topic: String? = nil, results: ResultsMode = .all, replyTo: String? = nil, badge: BadgeIncrement? = nil
    ) {
        fields = CopyOnWrite(
            Fields(
                id: id, app: app, audience: audience, type: type, subtype: subtype, payload: payload, badge: badge, pushType: pushType,
                priority: priority, expiration: expiration, collapseID: collapseID, topic: topic, results: results, replyTo: replyTo))
    }
}
