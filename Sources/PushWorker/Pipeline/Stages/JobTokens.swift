import DeviceTokens
import Synchronization

/// The devices a job names itself, handed as `ExplicitTokens` to the one step that reads them
/// (the audience's resolution, or a `local_time` hold), and held no longer: a streamed body's
/// list is handed over, not copied, and a job settled before its audience is read never sorts it.
final class JobTokens: Sendable {
    private enum Source: Sendable {
        case streamed(DeviceTokenList)
        case named([String])
    }

    private let source: Mutex<Source>
    /// Android devices' tokens (`audience.fcm_tokens`), after the APNs ones.
    private let android: Mutex<[String]>

    init(streamed: DeviceTokenList?, named: [String], android: [String] = []) {
        source = Mutex(streamed.map { .streamed($0) } ?? .named(named))
        self.android = Mutex(android)
    }

    /// The tokens, once: a second take finds none.
    func take() -> ExplicitTokens {
        let android = android.withLock { android in
            defer { android = [] }
            return android
        }
        return source.withLock { source in
            switch source {
            case .streamed(let list):
                source = .named([])  // `list` its only holder: sorted in place, not copied
                return ExplicitTokens(consume list, android: android)
            case .named(let tokens):
                source = .named([])
                return ExplicitTokens(tokens, android: android)
            }
        }
    }
}
