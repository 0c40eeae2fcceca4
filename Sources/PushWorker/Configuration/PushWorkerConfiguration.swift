import APNsHTTP2
import Foundation
import Yams

/// The worker's configuration file (YAML): the APNs apps, and the broker settings at the top level.
public struct PushWorkerConfiguration: Sendable, Decodable, Equatable {
    public var apps: [AppConfiguration]
    public var worker: WorkerSettings

    enum CodingKeys: String, CodingKey, CaseIterable { case apps }

    public init(apps: [AppConfiguration], worker: WorkerSettings = WorkerSettings()) {
        self.apps = apps
        self.worker = worker
    }

    public init(from decoder: Decoder) throws {
        try KnownKeys.check(decoder, names: KnownKeys.names(CodingKeys.self) + KnownKeys.names(WorkerSettings.CodingKeys.self))
        apps = try decoder.container(keyedBy: CodingKeys.self).decode([AppConfiguration].self, forKey: .apps)
        worker = try WorkerSettings(from: decoder)
    }

    /// Reads and checks a configuration file; errors name the file and the key.
    public static func load(file: String) throws(ConfigurationError) -> PushWorkerConfiguration {
        let text: String
        do { text = try String(contentsOfFile: file, encoding: .utf8) } catch {
            throw ConfigurationError(file: file, key: "", "cannot read the file: \(error.localizedDescription)")
        }
        return try parse(text, file: file)
    }

    public static func parse(_ text: String, file: String) throws(ConfigurationError) -> PushWorkerConfiguration {
        let configuration: PushWorkerConfiguration
        do {
            configuration = try YAMLDecoder().decode(PushWorkerConfiguration.self, from: text)
        } catch let error as DecodingError {
            throw Self.describe(error, file: file)
        } catch {
            throw ConfigurationError(file: file, key: "", "not valid YAML: \(error)")
        }
        var names = Set<String>()
        for (index, app) in configuration.apps.enumerated() {
            guard !app.name.isEmpty else { throw ConfigurationError(file: file, key: "apps[\(index)].name", "is empty") }
            guard !app.name.contains("#") else { throw ConfigurationError(file: file, key: "apps[\(index)].name", "'\(app.name)' contains '#', which the registry keeps for Live Activity tokens ('<app>#push-to-start')") }
            guard names.insert(app.name).inserted else {
                throw ConfigurationError(file: file, key: "apps[\(index)].name", "'\(app.name)' is used by another app")
            }
            guard !app.topic.isEmpty else { throw ConfigurationError(file: file, key: "apps[\(index)].topic", "is empty") }
        }
        // The file's own value; PUSHWORKER_METRICS_ADDRESS is checked where it is applied (the
        // worker's start and `config check`), so parsing a file never depends on the environment.
        _ = try configuration.worker.metricsEndpoint(file: file, environment: [:])
        return configuration
    }

    /// The app named `name`, or the only one when `name` is nil.
    public func app(named name: String?) -> (index: Int, app: AppConfiguration)? {
        if let name {
            return apps.enumerated().first { $0.element.name == name }.map { ($0.offset, $0.element) }
        }
        return apps.count == 1 ? (0, apps[0]) : nil
    }

    static func describe(_ error: DecodingError, file: String) -> ConfigurationError {
        func path(_ codingPath: [CodingKey]) -> String {
            codingPath.reduce("") { result, key in
                if let index = key.intValue { return result + "[\(index)]" }
                return result.isEmpty ? key.stringValue : result + "." + key.stringValue
            }
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = path(context.codingPath)
            return ConfigurationError(file: file, key: parent.isEmpty ? key.stringValue : "\(parent).\(key.stringValue)", "is missing")
        case .typeMismatch(let type, let context):
            return ConfigurationError(file: file, key: path(context.codingPath), "should be \(Self.name(of: type))")
        case .valueNotFound(let type, let context):
            return ConfigurationError(file: file, key: path(context.codingPath), "should be \(Self.name(of: type)), found nothing")
        case .dataCorrupted(let context):
            return ConfigurationError(file: file, key: path(context.codingPath), Self.choiceMessage(context.debugDescription) ?? context.debugDescription)
        @unknown default:
            return ConfigurationError(file: file, key: "", "\(error)")
        }
    }

    /// The keys with a fixed set of values, by the type Codable names in its message.
    private static let choices: [String: [String]] = [
        "APNsTransport": APNsTransport.allCases.map(\.rawValue),
        "Environment": APNsClientConfiguration.Environment.allCases.map(\.rawValue),
    ]

    /// Codable's "Cannot initialize APNsTransport from invalid String value quic" as an operator
    /// reads it: the value, and what the key accepts.
    private static func choiceMessage(_ description: String) -> String? {
        let pattern = /Cannot initialize (\w+) from invalid \w+ value (.*)/
        guard let match = description.wholeMatch(of: pattern), let accepted = choices[String(match.1)] else { return nil }
        return "'\(match.2)' is not one of \(accepted.joined(separator: ", "))"
    }

    private static func name(of type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type: "a whole number"
        case is Bool.Type: "true or false"
        default: "\(type)".lowercased()
        }
    }
}
