import Foundation

/// A file of the test's own in the temporary directory, for configurations, keys and secrets
/// that the code under test reads by path.
public enum TemporaryFile {
    /// Writes `text` to a new file named `PREFIX-<random>SUFFIX` and returns its path.
    public static func write(_ text: String, prefix: String = "pw", suffix: String = "") throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))\(suffix)").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }
}
