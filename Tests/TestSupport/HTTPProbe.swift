import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// GETs from a worker's metrics endpoint, and the Prometheus text it serves, read into samples.
public enum HTTPProbe {
    public struct Answer: Sendable {
        public let status: Int
        public let body: String
    }

    /// nil while nothing answers on the port (the endpoint not up yet).
    public static func get(port: Int, _ path: String, headers: [(String, String)] = []) async -> Answer? {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.timeoutInterval = 10
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        guard let (data, response) = try? await URLSession.shared.data(for: request), let http = response as? HTTPURLResponse else {
            return nil
        }
        return Answer(status: http.statusCode, body: String(decoding: data, as: UTF8.self))
    }

    /// One line of the Prometheus text format: `name{label="value",…} number`.
    public struct Sample: Sendable, Equatable {
        public let name: String
        public let labels: [String: String]
        public let value: Double
    }

    public static func samples(_ text: String) -> [Sample] {
        text.split(separator: "\n").compactMap { line -> Sample? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { return nil }
            let series = line[..<space]
            guard let brace = series.firstIndex(of: "{") else { return Sample(name: String(series), labels: [:], value: value) }
            var labels: [String: String] = [:]
            for pair in series[series.index(after: brace)...].dropLast().split(separator: ",") {
                guard let equals = pair.firstIndex(of: "=") else { continue }
                labels[String(pair[..<equals])] = String(pair[pair.index(after: equals)...].dropFirst().dropLast())
            }
            return Sample(name: String(series[..<brace]), labels: labels, value: value)
        }
    }
}

extension Array where Element == HTTPProbe.Sample {
    /// The sum of the samples named `name` whose labels include `labels`.
    public func sum(_ name: String, _ labels: [String: String] = [:]) -> Double {
        filter { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }.reduce(0) { $0 + $1.value }
    }
}
