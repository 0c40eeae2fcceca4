import Foundation
import Stores

/// Sorts a job's devices by their users' quiet hours, as the registry keeps them: those whose
/// window holds `now` (in the zone of their window, else of the device or its user, else the
/// app's) are dropped or deferred to the window's end, as the job asks; the rest go now. One
/// query per thousand devices, for devices with a user only.
struct QuietHoursGate: Sendable {
    let store: any RegistryStore

    struct Split {
        var send: [Recipient] = []
        var dropped: [Recipient] = []
        /// By the end of their window (milliseconds since 1970).
        var deferred: [Int64: [Recipient]] = [:]
    }

    static let page = 1000

    func split(_ recipients: [Recipient], of job: PushJob, mode: PushJob.QuietHoursMode, zone: TimeZone, now: Int64) async throws -> Split {
        var split = Split()
        let tokens = recipients.lazy.filter { $0.user != nil }.map(\.token)
        guard !tokens.isEmpty else {
            split.send = recipients
            return split
        }
        var timing: [String: DeviceTiming] = [:]
        let all = Array(tokens)
        for start in stride(from: 0, to: all.count, by: Self.page) {
            let found = try await store.timing(
                app: job.registryApp, tokens: Array(all[start..<min(start + Self.page, all.count)]), preferencesApp: TokenNamespace.preferencesApp(job.registryApp))
            timing.merge(found) { first, _ in first }
        }
        var zones: [String: TimeZone] = [:]
        for recipient in recipients {
            guard let kept = timing[recipient.token], let window = kept.quietHours else {
                split.send.append(recipient)
                continue
            }
            var deviceZone = zone
            if let name = kept.zone {
                if let known = zones[name] { deviceZone = known } else if let made = TimeZone(identifier: name) { zones[name] = made; deviceZone = made }
            }
            guard let end = window.end(holding: now, zone: deviceZone) else {
                split.send.append(recipient)
                continue
            }
            if mode == .drop { split.dropped.append(recipient) } else { split.deferred[end, default: []].append(recipient) }
        }
        return split
    }
}
