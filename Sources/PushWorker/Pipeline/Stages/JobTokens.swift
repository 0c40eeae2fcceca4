import DeviceTokens
import Synchronization

/// The devices a job names itself, made into `ExplicitTokens` once, by whichever step reads them
/// first (the audience's resolution, or a `local_time` hold): a streamed body's list is handed
/// over, not copied, and a job settled before its audience is read never sorts it.
final class JobTokens: Sendable {
    private enum Source: Sendable {
        case streamed(DeviceTokenList)
        case named([String])
        case made(ExplicitTokens)
    }

    private let source: Mutex<Source>

    init(streamed: DeviceTokenList?, named: [String]) {
        source = Mutex(streamed.map { .streamed($0) } ?? .named(named))
    }

    func explicit() -> ExplicitTokens {
        source.withLock { source in
            let made: ExplicitTokens
            switch source {
            case .made(let tokens): return tokens
            case .streamed(let list):
                source = .named([])  // the list's only holder is `made`
                made = ExplicitTokens(consume list)
            case .named(let tokens): made = ExplicitTokens(tokens)
            }
            source = .made(made)
            return made
        }
    }
}
