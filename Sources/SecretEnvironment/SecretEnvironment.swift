import Foundation

/// Secrets read from the environment, or from a file named by the same variable with `_FILE`
/// appended: Docker secrets and Kubernetes Secret volumes are mounted as files, and a value given
/// as a file shows neither in `docker inspect` nor in a manifest. The convention is the official
/// RabbitMQ and PostgreSQL images' (`POSTGRES_PASSWORD_FILE`).
public enum SecretEnvironment {
    /// The fixed variables that carry a password: each may come as `NAME_FILE`.
    public static let fixedVariables = ["PUSHWORKER_AMQP_URL", "PUSHWORKER_POSTGRES_URL"]

    /// Why a secret could not be read; names the variables involved, never the value.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        /// The variable the configuration or the program asked for.
        public let variable: String
        public let message: String
        public var description: String { message }
    }

    /// The value of `variable`, from the environment or from the file `variable_FILE` names; nil
    /// when neither is set. Both set is refused: which one wins would be a guess.
    ///
    /// One trailing line break is dropped from a file (editors and `echo` add one; a secret
    /// never ends with it); an empty file is refused, as an unset variable would be.
    public static func value(of variable: String, in environment: [String: String]) throws(Failure) -> String? {
        let fileVariable = variable + "_FILE"
        guard let path = environment[fileVariable] else { return environment[variable] }
        guard environment[variable] == nil else {
            throw Failure(variable: variable, message: "\(variable) and \(fileVariable) are both set: give the value one way")
        }
        // The value itself given by mistake (`NAME_FILE=amqp://user:password@…`) must not be
        // printed back: only an absolute path is named.
        guard path.hasPrefix("/"), !path.contains("://") else {
            throw Failure(variable: variable, message: "\(fileVariable) is not an absolute file path (it should name the file that holds \(variable)'s value)")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw Failure(variable: variable, message: "\(fileVariable): cannot read '\(path)': no such file")
        }
        guard !isDirectory.boolValue else {
            throw Failure(variable: variable, message: "\(fileVariable): cannot read '\(path)': it is a directory")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Failure(variable: variable, message: "\(fileVariable): cannot read '\(path)': permission denied for uid \(getuid())")
        }
        guard let contents = String(data: data, encoding: .utf8) else {
            throw Failure(variable: variable, message: "\(fileVariable): '\(path)' is not UTF-8 text")
        }
        var value = Substring(contents)
        // "\r\n" is one Character in Swift.
        if value.last == "\n" || value.last == "\r\n" { value = value.dropLast() }
        guard !value.isEmpty else {
            throw Failure(variable: variable, message: "\(fileVariable): '\(path)' is empty")
        }
        return String(value)
    }

    /// `environment` with every listed variable given as a file read into the variable itself,
    /// and its `_FILE` variable removed.
    public static func resolving(_ variables: [String], in environment: [String: String]) throws(Failure) -> [String: String] {
        var resolved = environment
        for variable in variables where environment[variable + "_FILE"] != nil {
            resolved[variable] = try value(of: variable, in: environment)
            resolved[variable + "_FILE"] = nil
        }
        return resolved
    }

    /// Reads the fixed variables' files into this process's environment, once at start, so that
    /// every part of the program that reads `PUSHWORKER_AMQP_URL` sees the value.
    public static func applyToProcess(_ variables: [String] = fixedVariables) throws(Failure) {
        let environment = ProcessInfo.processInfo.environment
        let resolved = try resolving(variables, in: environment)
        for variable in variables where environment[variable + "_FILE"] != nil {
            if let value = resolved[variable] { setenv(variable, value, 1) }
            unsetenv(variable + "_FILE")
        }
    }
}
