import Foundation
import Stores

/// Typed access to the fields of a parsed JSON object, with errors naming the field.
struct JobFields {
    private let object: [String: Any]
    private let prefix: String

    init(_ object: [String: Any], prefix: String = "") {
        self.object = object
        self.prefix = prefix
    }

    private func wrongType(_ key: String, _ expected: String) -> JobError {
        JobError(.invalidField, field: prefix + key, "\(prefix + key) must be \(expected)")
    }

    /// `nil` when absent or JSON null.
    mutating func string(_ key: String) throws(JobError) -> String? {
        guard let value = object[key], !JSONValue.isNull(value) else { return nil }
        guard let text = value as? String else { throw wrongType(key, "a string") }
        return text
    }

    mutating func integer(_ key: String) throws(JobError) -> Int? {
        guard let value = object[key], !JSONValue.isNull(value) else { return nil }
        guard let number = JSONValue.number(value), !JSONValue.isBoolean(number) else { throw wrongType(key, "a whole number") }
        let double = number.doubleValue
        guard double.isFinite, double == double.rounded(), abs(double) < 1e15 else { throw wrongType(key, "a whole number") }
        return Int(double)
    }

    mutating func object(_ key: String) throws(JobError) -> [String: Any]? {
        guard let value = object[key], !JSONValue.isNull(value) else { return nil }
        guard let dictionary = value as? [String: Any] else { throw wrongType(key, "an object") }
        return dictionary
    }

    /// An array of strings; the error names the first element that is not one.
    mutating func strings(_ key: String) throws(JobError) -> [String]? {
        guard let value = object[key], !JSONValue.isNull(value) else { return nil }
        guard let array = value as? [Any] else { throw wrongType(key, "an array of strings") }
        var result: [String] = []
        result.reserveCapacity(array.count)
        for (index, element) in array.enumerated() {
            guard let text = element as? String else {
                throw JobError(.invalidField, field: "\(prefix)\(key)[\(index)]", "\(prefix)\(key)[\(index)] must be a string")
            }
            result.append(text)
        }
        return result
    }
}
