import APNs
import Foundation
import Synchronization

/// Everything the event loops share: the record of accepted notifications, fault budgets and
/// counters. One lock; the mock is a test tool, not a hot path.
final class MockAPNsState: Sendable {
    private struct State {
        var recorded: [RecordedNotification] = []
        var broadcasts: [RecordedBroadcast] = []
        /// bundle id → channel id → storage policy.
        var channels: [String: [String: APNsChannelStoragePolicy]]
        var faults: [MockAPNsFault]
        var unregistered: [String: Date]
        var requests = 0
        var inFlight = 0
        var peakInFlight = 0
        var connections = 0
        var errors: [String] = []
        /// Distinct provider tokens accepted, in first-use order.
        var providerTokens: [String] = []
        var fcmTokens: [String: (project: String, expiresAt: Date)] = [:]
        var fcmGrantsIssued = 0
        var fcmGrantRefusals = 0
        var fcmOutagesLeft: Int
        var fcmUnregistered: Set<String>
        var fcmFailures: [String: MockFCMFailure]
        var fcmMessages: [RecordedFCMMessage] = []
        var fcmMessageNumber = 0
    }

    private let state: Mutex<State>

    init(configuration: MockAPNsConfiguration) {
        state = Mutex(State(
            channels: configuration.channels, faults: configuration.faults, unregistered: configuration.unregisteredTokens,
            fcmOutagesLeft: configuration.fcmTokenEndpointOutages, fcmUnregistered: configuration.fcmUnregisteredTokens, fcmFailures: configuration.fcmFailures))
    }

    // MARK: FCM

    func fcmTokenIssued(_ token: String, project: String, expiresAt: Date) {
        state.withLock { state in
            state.fcmTokens[token] = (project, expiresAt)
            state.fcmGrantsIssued += 1
        }
    }

    func fcmToken(_ token: String) -> (project: String, expiresAt: Date)? {
        state.withLock { $0.fcmTokens[token] }
    }

    /// Whether this grant request is one of the scripted outages (and uses it up).
    func fcmTokenEndpointDown() -> Bool {
        state.withLock { state in
            guard state.fcmOutagesLeft > 0 else { return false }
            state.fcmOutagesLeft -= 1
            return true
        }
    }

    func fcmGrantRefused() {
        state.withLock { $0.fcmGrantRefusals += 1 }
    }

    /// Access tokens issued, and grants refused.
    var fcmGrants: (issued: Int, refused: Int) { state.withLock { ($0.fcmGrantsIssued, $0.fcmGrantRefusals) } }

    func revokeFCMTokens() {
        state.withLock { $0.fcmTokens.removeAll() }
    }

    func fcmUnregistered(_ token: String) -> Bool {
        state.withLock { $0.fcmUnregistered.contains(token) }
    }

    func markFCMUnregistered(_ token: String) {
        state.withLock { _ = $0.fcmUnregistered.insert(token) }
    }

    /// The failure scripted for this token, its count taken.
    func firingFCMFailure(token: String) -> MockFCMFailure? {
        state.withLock { state in
            guard var failure = state.fcmFailures[token] else { return nil }
            if let times = failure.times {
                failure.times = times - 1
                state.fcmFailures[token] = times > 1 ? failure : nil
            }
            return failure
        }
    }

    func nextFCMMessageNumber() -> Int {
        state.withLock { state in
            state.fcmMessageNumber += 1
            return state.fcmMessageNumber
        }
    }

    func record(_ message: RecordedFCMMessage) {
        state.withLock { $0.fcmMessages.append(message) }
    }

    var fcmMessages: [RecordedFCMMessage] { state.withLock { $0.fcmMessages } }

    func record(_ notification: RecordedNotification) {
        state.withLock { $0.recorded.append(notification) }
    }

    var recorded: [RecordedNotification] { state.withLock { $0.recorded } }

    func providerTokenVerified(_ jwt: String) {
        state.withLock { if !$0.providerTokens.contains(jwt) { $0.providerTokens.append(jwt) } }
    }

    var providerTokens: [String] { state.withLock { $0.providerTokens } }

    /// Forgets notifications and broadcasts alike.
    func clearRecorded() {
        state.withLock { state in
            state.recorded.removeAll()
            state.broadcasts.removeAll()
        }
    }

    func record(_ broadcast: RecordedBroadcast) {
        state.withLock { $0.broadcasts.append(broadcast) }
    }

    var broadcasts: [RecordedBroadcast] { state.withLock { $0.broadcasts } }

    // MARK: Broadcast channels

    var channels: [String: [String: APNsChannelStoragePolicy]] { state.withLock { $0.channels } }

    func channelPolicy(bundleID: String, id: String) -> APNsChannelStoragePolicy? {
        state.withLock { $0.channels[bundleID]?[id] }
    }

    /// A new channel with a random 16-byte id, or nil when the bundle id has `limit` already.
    func createChannel(bundleID: String, policy: APNsChannelStoragePolicy, limit: Int) -> String? {
        state.withLock { state in
            guard state.channels[bundleID, default: [:]].count < limit else { return nil }
            var id: String
            repeat {
                id = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            } while state.channels[bundleID]?[id] != nil
            state.channels[bundleID, default: [:]][id] = policy
            return id
        }
    }

    /// Whether the channel existed.
    func deleteChannel(bundleID: String, id: String) -> Bool {
        state.withLock { $0.channels[bundleID]?.removeValue(forKey: id) != nil }
    }

    func setChannels(_ channels: [String: [String: APNsChannelStoragePolicy]]) { state.withLock { $0.channels = channels } }

    func requestArrived() {
        state.withLock { state in
            state.requests += 1
            state.inFlight += 1
            state.peakInFlight = max(state.peakInFlight, state.inFlight)
        }
    }

    func requestFinished() { state.withLock { $0.inFlight -= 1 } }

    /// The most requests open at once across all connections.
    var peakInFlight: Int { state.withLock { $0.peakInFlight } }

    var requests: Int { state.withLock { $0.requests } }

    func newConnectionNumber() -> Int {
        state.withLock { state in
            state.connections += 1
            return state.connections
        }
    }

    var connections: Int { state.withLock { $0.connections } }

    func recordError(_ error: String) { state.withLock { if $0.errors.count < 1000 { $0.errors.append(error) } } }

    var errors: [String] { state.withLock { $0.errors } }

    /// When APNs last knew the token valid: never later than the request (a date in the future
    /// means "became invalid just now", whenever it is asked).
    func unregisteredSince(_ token: String) -> Date? { state.withLock { $0.unregistered[token] }.map { min($0, Date()) } }

    func setUnregistered(_ token: String, since: Date?) { state.withLock { $0.unregistered[token] = since } }

    func setFaults(_ faults: [MockAPNsFault]) { state.withLock { $0.faults = faults } }

    /// The faults that fire for this request, spending one of each one's budget: `token` for a
    /// device request (else ""), `channel` for a broadcast or management call naming one.
    func firingFaults(token: String, channel: String? = nil, where matches: (MockAPNsFault.Action) -> Bool) -> [MockAPNsFault.Action] {
        state.withLock { state in
            var fired: [MockAPNsFault.Action] = []
            for index in state.faults.indices {
                let fault = state.faults[index]
                let channelMatches = fault.channels.map { channels in channel.map { channels.contains($0) } ?? false } ?? true
                guard matches(fault.action), fault.tokens?.contains(token) ?? true, channelMatches, fault.times.map({ $0 > 0 }) ?? true
                else { continue }
                if let times = fault.times { state.faults[index].times = times - 1 }
                fired.append(fault.action)
            }
            return fired
        }
    }
}
