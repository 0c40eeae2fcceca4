/// A user's say over which notifications reach their devices: a whitelist and a blacklist, each
/// mapping a notification `type` to the `subtype`s that are exceptions to the rule for that type.
///
/// - Empty whitelist and blacklist: everything passes.
/// - Non-empty whitelist: a notification passes only if its type is a key and its subtype is not
///   among that key's exceptions.
/// - Blacklist: a notification whose type is a key is dropped, unless its subtype is among that
///   key's exceptions.
/// - Both lists apply. A notification without a type always passes.
public struct NotificationPreferences: Sendable, Hashable, Codable {
    public var whitelist: [String: [String]]
    public var blacklist: [String: [String]]

    public init(whitelist: [String: [String]] = [:], blacklist: [String: [String]] = [:]) {
        self.whitelist = whitelist
        self.blacklist = blacklist
    }

    /// Everything passes.
    public static let none = NotificationPreferences()

    public func allows(type: String?, subtype: String?) -> Bool {
        guard let type else { return true }
        if !whitelist.isEmpty {
            guard let exceptions = whitelist[type] else { return false }
            if let subtype, exceptions.contains(subtype) { return false }
        }
        if let exceptions = blacklist[type] {
            guard let subtype, exceptions.contains(subtype) else { return false }
        }
        return true
    }
}
