import Foundation
import Logging
import PostgresRegistry
import Registry

extension PushWorkerConfiguration {
    /// The registry the configuration names, opened and its schema migrated, or nil when it names
    /// none. Opened before anything is consumed, so a bad path or URL fails the start with the key
    /// named. `PUSHWORKER_POSTGRES_URL` wins over the URL of `registry.postgres`, so a password can
    /// stay out of the file.
    public func openRegistryStore(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger
    ) async throws(ConfigurationError) -> (any RegistryStore)? {
        guard let settings = worker.registry else { return nil }
        if settings.postgres != nil && settings.sqlite != nil {
            throw ConfigurationError(file: file, key: "registry", "names both sqlite and postgres; choose one")
        }
        if let configured = settings.postgres {
            let url = environment["PUSHWORKER_POSTGRES_URL"] ?? configured
            let key = environment["PUSHWORKER_POSTGRES_URL"] != nil ? "PUSHWORKER_POSTGRES_URL" : "registry.postgres"
            do {
                return try await PostgresRegistryStore(url: url, logger: logger)
            } catch {
                throw ConfigurationError(file: file, key: key, error.message)
            }
        }
        guard let path = settings.sqlite, !path.isEmpty else {
            throw ConfigurationError(file: file, key: "registry", "names no store; expected {sqlite: FILE} or {postgres: URL}")
        }
        let resolved = path.hasPrefix("/") ? path : URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent(path).path
        do {
            return try SQLiteRegistryStore(path: resolved)
        } catch {
            throw ConfigurationError(file: file, key: "registry.sqlite", error.message)
        }
    }
}
