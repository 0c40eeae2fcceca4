import AMQP
import APNs
import DeviceTokens
import FCM
import JSONStream
import Stores
import Synchronization

/// Reads a job too large to hold (a broadcast to a million tokens) as its frames arrive: the
/// tokens of `audience.tokens` go, as bytes, into a `DeviceTokenList`, those of
/// `audience.fcm_tokens` into a list of strings (deduplicated), and everything else is rewritten
/// as a small skeleton job (with `"tokens": []`, and the first Android token alone, so the
/// decoder's rules for a job with Android devices apply) that `JobDecoder` checks as usual.
/// Token rules are checked here, as they arrive, with the same messages as the decoder's.
///
/// Fed by the broker connection's I/O thread, then handed with the delivery to the worker,
/// which alone calls `finish`; the lock only makes that hand-over explicit.
public final class StreamedJobReader: AMQPBodyReceiver {
    /// What a streamed job came to: its skeleton and tokens, or why it was refused.
    public struct Outcome: Sendable {
        public var skeleton: [UInt8]
        public var tokens: DeviceTokenList
        /// `audience.fcm_tokens`, each once, in order: never parsed into Foundation objects.
        public var android: [String]
    }

    private let state: Mutex<Reading>
    /// The body's size, as the broker announced it.
    public let bodySize: Int

    public init(bodySize: Int) {
        self.bodySize = bodySize
        state = Mutex(Reading(bodySize: bodySize))
    }

    public func receive(_ fragment: RawSpan) {
        state.withLock { $0.feed(fragment) }
    }

    /// Ends the document; the skeleton and tokens, or the job's error. The tokens are moved out,
    /// not shared: the caller sorts them in place, which would otherwise copy tens of megabytes
    /// while this reader (kept by the delivery) still held the original.
    public func finish() -> Result<Outcome, JobError> {
        state.withLock { $0.finish() }
    }
}

/// The parse itself; lives inside the reader's lock.
private struct Reading: ~Copyable {
    private let events: Events
    private let parser: JSONStreamParser

    init(bodySize: Int) {
        events = Events(bodySize: bodySize)
        parser = JSONStreamParser(handler: events)
    }

    func feed(_ fragment: RawSpan) {
        guard events.error == nil else { return }
        do { try parser.parse(fragment) } catch { events.refuse(error) }
    }

    func finish() -> Result<StreamedJobReader.Outcome, JobError> {
        if events.error == nil {
            do { try parser.finish() } catch { events.refuse(error) }
        }
        if let error = events.error { return .failure(error) }
        defer {
            events.tokens = DeviceTokenList()
            events.android = []
            events.forgetSeen()
        }
        return .success(.init(skeleton: events.skeleton.bytes, tokens: events.tokens, android: events.android))
    }
}

/// Follows where in the document each event is, to tell the tokens from the rest.
private final class Events: JSONEventHandler {
    let skeleton = JSONStreamWriter()
    var tokens = DeviceTokenList()
    var android: [String] = []
    private var androidSeen = Set<String>()
    /// Entries of `audience.fcm_tokens` read, duplicates included (an error names the entry).
    private var androidEntries = 0
    var error: JobError?
    /// Open containers, each with the key last seen in it (objects only).
    private var path: [(isObject: Bool, key: String?)] = []
    private var inTokens = false
    private var inAndroid = false

    init(bodySize: Int) {
        tokens.reserve(forBodyOf: bodySize)
    }

    /// The set that told duplicates apart is not kept with the delivery for the rest of the job.
    func forgetSeen() {
        androidSeen = []
    }

    func handle(_ event: JSONEvent) -> Bool {
        if inAndroid && path.count == 3 {
            switch event {
            case .string(let token):
                let field = "audience.fcm_tokens[\(androidEntries)]"
                androidEntries += 1
                if let problem = FCMRegistrationToken.problem(token) {
                    error = JobError(.invalidToken, field: field, "\(field) \(problem)")
                    return false
                }
                guard androidSeen.insert(token).inserted else { return true }
                android.append(token)
                // The first goes into the skeleton as well, the rest only here.
                if android.count > 1 { return true }
            case .endArray:
                break
            default:
                let field = "audience.fcm_tokens[\(androidEntries)]"
                error = JobError(.invalidField, field: field, "\(field) must be a string")
                return false
            }
        }
        if inTokens && path.count == 3 {
            switch event {
            case .string(let token):
                return keep(token)
            case .endArray:
                break
            default:
                error = JobError(.invalidField, field: "audience.tokens[\(tokens.count)]", "audience.tokens[\(tokens.count)] must be a string")
                return false
            }
        }
        switch event {
        case .key(let key):
            path[path.count - 1].key = key
        case .startArray where path.count == 2 && path[0].isObject && path[0].key == "audience" && path[1].isObject && path[1].key == "tokens":
            inTokens = true
            path.append((false, nil))
        case .startArray where path.count == 2 && path[0].isObject && path[0].key == "audience" && path[1].isObject && path[1].key == "fcm_tokens":
            inAndroid = true
            path.append((false, nil))
        case .startObject, .startArray:
            path.append((event == .startObject, nil))
        case .endObject, .endArray:
            path.removeLast()
            if path.count == 2 {
                inTokens = false
                inAndroid = false
            }
        default:
            break
        }
        do { try skeleton.write(event) } catch {
            self.error = JobError(.invalidJSON, field: nil, "the job cannot be read: \(error.message)")
            return false
        }
        return true
    }

    private func keep(_ logged: String) -> Bool {
        let token = APNsDeviceToken.normalized(logged)
        do { try APNsDeviceToken.validate(token) } catch {
            // The field is named only for the token that fails: a million interpolations per
            // large job otherwise.
            let field = "audience.tokens[\(tokens.count)]"
            // As the decoder says it of a job read whole.
            let message = DevicePlatform(ofToken: logged) == .fcm
                ? "\(field) is an FCM registration token (an Android device): name it in audience.fcm_tokens" : "\(field): \(error.message)"
            self.error = JobError(.invalidToken, field: field, message)
            return false
        }
        tokens.append(hex: token)
        return true
    }

    func refuse(_ failure: JSONStreamError) {
        guard error == nil else { return }
        error = JobError(.invalidJSON, field: nil, "the job is not valid JSON: \(failure.message) at byte \(failure.offset)")
    }
}
