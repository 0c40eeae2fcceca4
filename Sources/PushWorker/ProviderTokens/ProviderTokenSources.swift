import APNs
import APNsHTTP2

/// A process's provider-token sources: one per key and team, whichever apps and services send
/// with it. Each source signs tokens of its own, and APNs answers TooManyProviderTokenUpdates
/// when one key's token keeps changing; a second source for a key (the channel management
/// beside the pushes) would alternate two tokens, and miss the fleet's agreed one.
public struct ProviderTokenSources: Sendable {
    private var byName: [String: ProviderTokenSource] = [:]

    public init() {}

    /// Every source, one per key.
    public var all: [ProviderTokenSource] { Array(byName.values) }

    /// Points `configuration` at the source already held for its key, or holds its own.
    public mutating func share(_ configuration: inout APNsClientConfiguration) {
        guard case .token(let source) = configuration.authentication else { return }
        let name = ProviderTokenAgreement.name(of: source)
        if let shared = byName[name] { configuration.authentication = .token(shared) } else { byName[name] = source }
    }
}
