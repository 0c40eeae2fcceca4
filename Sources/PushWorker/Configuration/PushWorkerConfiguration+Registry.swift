import Foundation
import Logging
import PostgresStores
import SQLiteStores
import Stores
import RegistryAuth

extension PushWorkerConfiguration {
    /// The registry the configuration names, opened and its schema migrated, or nil when it names
    /// none. Opened before anything is consumed, so a bad path or URL fails the start with the key
    /// named. `PUSHWORKER_POSTGRES_URL` wins over the URL of `registry.postgres`, so a password can
    /// stay out of the file.
    public func openRegistryStore(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger
    ) async throws(ConfigurationError) -> (any RegistryStore)? {
        try await openRegistry(file: file, environment: environment, logger: logger)?.store
    }

    /// The registry's backend, opened: which one it is decides where the ledger and the schedule go.
    enum OpenedRegistry {
        case sqlite(SQLiteRegistryStore, path: String)
        case postgres(PostgresRegistryStore)

        var store: any RegistryStore {
            switch self {
            case .sqlite(let store, _): store
            case .postgres(let store): store
            }
        }
    }

    /// `registry.postgres_connections`, checked; its default when not set.
    static func postgresConnections(_ settings: WorkerSettings.Registry, file: String) throws(ConfigurationError) -> Int {
        guard let connections = settings.postgresConnections else { return WorkerSettings.Registry.defaultPostgresConnections }
        if settings.postgres == nil {
            throw ConfigurationError(file: file, key: "registry.postgres_connections", "is for a PostgreSQL registry; this one is SQLite")
        }
        let range = WorkerSettings.Registry.postgresConnectionsRange
        guard range.contains(connections) else {
            throw ConfigurationError(file: file, key: "registry.postgres_connections", "\(connections) is not between \(range.lowerBound) and \(range.upperBound)")
        }
        return connections
    }

    /// - Parameter forWorker: a worker's registry: a PostgreSQL pool holds its connections open
    ///   (see `PostgresPool`); a command's opens what it uses.
    func openRegistry(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment, forWorker: Bool = false, logger: Logger
    ) async throws(ConfigurationError) -> OpenedRegistry? {
        guard let settings = worker.registry else { return nil }
        if settings.postgres != nil && settings.sqlite != nil {
            throw ConfigurationError(file: file, key: "registry", "names both sqlite and postgres; choose one")
        }
        let connections = try Self.postgresConnections(settings, file: file)
        if let configured = settings.postgres {
            let url = environment["PUSHWORKER_POSTGRES_URL"] ?? configured
            let key = environment["PUSHWORKER_POSTGRES_URL"] != nil ? "PUSHWORKER_POSTGRES_URL" : "registry.postgres"
            do {
                return .postgres(try await PostgresRegistryStore(url: url, maximumConnections: connections, holdsConnections: forWorker, logger: logger))
            } catch {
                throw ConfigurationError(file: file, key: key, error.message)
            }
        }
        guard let path = settings.sqlite, !path.isEmpty else {
            throw ConfigurationError(file: file, key: "registry", "names no store; expected {sqlite: FILE} or {postgres: URL}")
        }
        let resolved = Self.path(path, besides: file)
        do {
            return .sqlite(try SQLiteRegistryStore(path: resolved), path: resolved)
        } catch {
            throw ConfigurationError(file: file, key: "registry.sqlite", error.message)
        }
    }

    /// The key material `registry.auth` names, read and checked; nil when auth is off. Paths are
    /// relative to the configuration file.
    public func registryAuthKeys(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ConfigurationError) -> AuthKeyMaterial? {
        guard let auth = worker.registry?.auth else { return nil }
        func resolved(_ path: String?) -> String? {
            path.map { $0.hasPrefix("/") ? $0 : URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent($0).path }
        }
        guard !auth.issuer.isEmpty else { throw ConfigurationError(file: file, key: "registry.auth.issuer", "is empty") }
        guard !auth.audience.isEmpty else { throw ConfigurationError(file: file, key: "registry.auth.audience", "is empty") }
        do {
            return try AuthKeyMaterial.load(
                keyFile: resolved(auth.keyFile), jwksFile: resolved(auth.jwksFile), secretVariable: auth.hs256SecretEnv, environment: environment)
        } catch {
            throw ConfigurationError(file: file, key: error.key, error.message)
        }
    }

    /// The authorizer of registry commands, or nil when `registry.auth` is off.
    public func registryAuthorizer(
        file: String, environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws(ConfigurationError) -> CommandAuthorizer? {
        guard let auth = worker.registry?.auth, let material = try registryAuthKeys(file: file, environment: environment) else { return nil }
        do {
            return try await CommandAuthorizer(material: material, issuer: auth.issuer, audience: auth.audience)
        } catch {
            throw ConfigurationError(file: file, key: "registry.auth", "cannot use its key: \(error)")
        }
    }

    /// A path as the configuration names it: relative ones from the configuration file's folder.
    static func path(_ path: String, besides file: String) -> String {
        path.hasPrefix("/") ? path : URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent(path).path
    }
}
