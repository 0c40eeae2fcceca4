/// Every reason string APNs documents, plus the undocumented `BadEnvironmentKeyInToken` the live
/// service sends instead of `BadEnvironmentKeyIdInToken`. Unknown strings are kept as `.other`.
public enum APNsErrorReason: Sendable, Hashable, CustomStringConvertible {
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden, invalidProviderToken
    case missingProviderToken, unrelatedKeyIdInToken, badEnvironmentKeyIdInToken, badEnvironmentKeyInToken
    case badPath, methodNotAllowed
    case expiredToken, unregistered
    case payloadTooLarge
    case tooManyProviderTokenUpdates, tooManyRequests
    case internalServerError
    case serviceUnavailable, shutdown
    // Broadcasts and channel management (iOS 18): all 400, all about the request, never retried.
    /// `apns-channel-id` is missing.
    case missingChannelId
    /// The channel id is not properly base64-encoded, or too long.
    case badChannelId
    /// No such channel for this app and environment (deleted, or never created).
    case channelNotRegistered
    /// The app has reached its maximum number of channels (10,000 per environment).
    case cannotCreateChannelConfig
    /// `apns-push-type` (or the body's `push-type`) is missing.
    case missingPushType
    /// Broadcast push is not enabled for the topic (the app's capability in the developer account).
    case featureNotEnabled
    case other(String)

    public static let known: [APNsErrorReason] = [
        .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
        .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
        .missingTopic, .payloadEmpty, .topicDisallowed, .badCertificate, .badCertificateEnvironment,
        .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken,
        .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken, .badPath, .methodNotAllowed, .expiredToken,
        .unregistered, .payloadTooLarge, .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError,
        .serviceUnavailable, .shutdown, .missingChannelId, .badChannelId, .channelNotRegistered, .cannotCreateChannelConfig,
        .missingPushType, .featureNotEnabled,
    ]

    private static let byString: [String: APNsErrorReason] = Dictionary(uniqueKeysWithValues: known.map { ($0.rawValue, $0) })

    public init(_ reason: String) {
        self = Self.byString[reason] ?? .other(reason)
    }

    /// The string on the wire.
    public var rawValue: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIdInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIdInToken: "BadEnvironmentKeyIdInToken"
        case .badEnvironmentKeyInToken: "BadEnvironmentKeyInToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .missingChannelId: "MissingChannelId"
        case .badChannelId: "BadChannelId"
        case .channelNotRegistered: "ChannelNotRegistered"
        case .cannotCreateChannelConfig: "CannotCreateChannelConfig"
        case .missingPushType: "MissingPushType"
        case .featureNotEnabled: "FeatureNotEnabled"
        case .other(let reason): reason
        }
    }

    public var description: String { rawValue }

    /// The HTTP status APNs answers with for this reason.
    public var status: Int {
        switch self {
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
            .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .badEnvironmentKeyInToken:
            403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .expiredToken, .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        default: 400
        }
    }

    /// What a sender should do about it.
    public enum Disposition: Sendable, Hashable {
        /// The request is wrong or the device is gone: never retry.
        case final
        /// A transient refusal: retry with backoff.
        case retry
        /// The provider token is stale: sign a new one, then retry.
        case retryWithNewProviderToken
        /// The server is closing this connection: retry on another.
        case retryOnNewConnection
    }

    public var disposition: Disposition {
        switch self {
        case .expiredProviderToken: .retryWithNewProviderToken
        case .shutdown, .idleTimeout: .retryOnNewConnection
        case .tooManyRequests, .tooManyProviderTokenUpdates, .internalServerError, .serviceUnavailable: .retry
        default: .final
        }
    }

    /// What a device registry should make of a device APNs answered with this reason.
    public enum DeviceFate: Sendable, Hashable {
        /// 410 (`Unregistered`, `ExpiredToken`): the app no longer has the token; remove the
        /// device, unless it was registered again after APNs' timestamp.
        case gone
        /// `BadDeviceToken`, `DeviceTokenNotForTopic`: the token will never work for this app;
        /// keep the row (an operator may want to see it) but stop resolving it.
        case invalid
    }

    /// The one dead-device rule: the worker tells the registry of exactly these, and both stores
    /// act on them. Nil for reasons that say nothing about the device.
    public var deviceFate: DeviceFate? {
        switch self {
        case .unregistered, .expiredToken: .gone
        case .badDeviceToken, .deviceTokenNotForTopic: .invalid
        default: nil
        }
    }
}
