import Foundation

/// The process's peak resident memory, from /proc/self/status.
enum PeakMemory {
    static var kibibytes: Int { kibibytes(of: nil) }

    /// VmHWM of a process (this one when nil), from /proc.
    static func kibibytes(of pid: Int32?) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid.map(String.init) ?? "self")/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return 0 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
}
