import Stores
import Synchronization

/// The per-device results of a `results: batched` job or chunk, packed into `results` messages:
/// `{"app": …, "chunk": "2/5" | null, "job_id": …, "results": [<result>, …]}`, each result the
/// object a `results: all` job publishes alone.
///
/// Devices add their result as they finish; the one that fills the batch takes it and publishes
/// it, so a batch's bytes are bounded, whatever the job's size, and the rest goes with the
/// summary. A message per device costs the broker far more CPU than its bytes (about 64 µs per
/// message on a quorum queue against well under 1 µs per result in a packed one).
final class ResultBatch: Sendable {
    /// A message ready to publish, and how many results it holds.
    struct Message: Sendable {
        var body: [UInt8]
        var count: Int
        /// Its id, which the ledger's records of its results carry until it is marked confirmed.
        var id: Int64
        /// The devices whose results it publishes again from the ledger (a job that came back):
        /// their records stop naming the earlier message once this one is confirmed.
        var answers: [String] = []
    }

    /// A batch goes once its results pass this many bytes: about 900 results of 280 bytes, so the
    /// default chunk of 1000 devices is one message or two, and a message stays far below the
    /// broker's frame and memory limits.
    static let defaultMaximumBytes = 256 * 1024

    private let prefix: [UInt8]
    private let maximumBytes: Int
    private let state: Mutex<Open>

    /// The message being filled.
    private struct Open {
        var bytes: [UInt8]
        var count = 0
        var id: Int64
        var answers: [String] = []
    }

    /// A message's id: random, so that the messages of a job's every attempt (a worker killed,
    /// the job taken again elsewhere) never share one.
    static func newID() -> Int64 { Int64.random(in: 1...Int64.max) }

    init(jobID: String, app: String, chunk: String?, maximumBytes: Int = ResultBatch.defaultMaximumBytes) {
        var prefix = Array(#"{"app":"#.utf8)
        JSONText.appendString(app, to: &prefix)
        prefix += #","chunk":"#.utf8
        if let chunk { JSONText.appendString(chunk, to: &prefix) } else { prefix += "null".utf8 }
        prefix += #","job_id":"#.utf8
        JSONText.appendString(jobID, to: &prefix)
        prefix += #","results":["#.utf8
        self.prefix = prefix
        self.maximumBytes = maximumBytes
        // One random draw per batch (a system call): its messages count on from it.
        state = Mutex(Open(bytes: prefix, id: Self.newID()))
    }

    /// Adds a device's result; returns the id of the message it went in (for its ledger record)
    /// and the message when it is full, for the caller to publish.
    /// - Parameter answering: the result is published again from the ledger.
    func add(_ result: PushResult, answering: Bool = false) -> (message: Int64, full: Message?) {
        let json = result.json  // written outside the lock: the part that costs
        let (id, full) = state.withLock { state -> (Int64, Open?) in
            if state.count > 0 { state.bytes.append(UInt8(ascii: ",")) }
            state.bytes += json
            state.count += 1
            if answering { state.answers.append(result.token) }
            guard state.bytes.count - prefix.count >= maximumBytes else { return (state.id, nil) }
            return (state.id, take(&state))
        }
        return (id, full.map(Self.close))
    }

    /// The results not yet taken, if any: published before the summary.
    func drain() -> Message? {
        state.withLock { state in state.count > 0 ? take(&state) : nil }.map(Self.close)
    }

    /// Swaps the batch out under the lock; it is closed outside it, with no copy (its buffer is
    /// then referenced once). The fresh buffer reserves nothing: the drain at the end of every
    /// job, one-device jobs included, would otherwise allocate a full batch to throw away.
    private func take(_ state: inout Open) -> Open {
        var fresh = Open(bytes: prefix, id: state.id &+ 1)
        swap(&state, &fresh)
        return fresh
    }

    private static func close(_ batch: Open) -> Message {
        var body = batch.bytes
        body += "]}".utf8
        return Message(body: body, count: batch.count, id: batch.id, answers: batch.answers)
    }
}
