import Foundation

/// The process's peak resident memory, from /proc.
enum PeakMemory {
    static var kibibytes: Int { kibibytes(of: nil) }

    /// VmHWM of a process (this one when nil).
    static func kibibytes(of pid: Int32?) -> Int { field("VmHWM:", of: pid) }

    /// VmRSS of this process now.
    static var residentKibibytes: Int { field("VmRSS:", of: nil) }

    /// Starts the peak again from the memory resident now (Linux's clear_refs), so one phase of a
    /// benchmark is measured apart from the phases before it.
    static func reset() {
        try? Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/self/clear_refs"))
    }

    private static func field(_ name: String, of pid: Int32?) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid.map(String.init) ?? "self")/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) })
        else { return 0 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
}
