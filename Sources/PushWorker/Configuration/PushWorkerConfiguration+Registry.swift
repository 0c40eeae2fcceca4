import Foundation
import Registry

extension PushWorkerConfiguration {
    /// The registry the configuration names, opened and its schema migrated, or nil when it names
    /// none. Opened before anything is consumed, so a bad path fails the start with the key named.
    public func openRegistryStore(file: String) throws(ConfigurationError) -> (any RegistryStore)? {
        guard let settings = worker.registry else { return nil }
        if settings.postgres != nil {
            throw ConfigurationError(file: file, key: "registry.postgres", "the PostgreSQL registry is not supported yet; use registry.sqlite")
        }
        guard let path = settings.sqlite, !path.isEmpty else {
            throw ConfigurationError(file: file, key: "registry", "names no store; expected {sqlite: FILE}")
        }
        let resolved = path.hasPrefix("/") ? path : URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent(path).path
        do {
            return try SQLiteRegistryStore(path: resolved)
        } catch {
            throw ConfigurationError(file: file, key: "registry.sqlite", error.message)
        }
    }
}
