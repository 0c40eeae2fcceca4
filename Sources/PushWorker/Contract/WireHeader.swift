import Foundation

/// The AMQP headers pushworker reads and writes: the one place their names are spelt, for the
/// worker, `pushworker dlq`, tests and producers' documentation (docs/jobs.md) alike.
public enum WireHeader {
    /// On a dead letter: the stable error code (`JobError.Code`).
    public static let error = "x-pushworker-error"
    /// On a dead letter: the sentence naming the field.
    public static let errorMessage = "x-pushworker-error-message"
    /// On a dead letter: the field at fault, as the job contract spells it.
    public static let errorField = "x-pushworker-error-field"
    /// On a dead letter the worker refused: the queue it was consumed from, where a replay sends
    /// it back (a registry command to the registry queue, a job to the jobs queue).
    public static let queue = "x-pushworker-queue"
    /// On a dead letter replayed before: the reason it was first dead-lettered for, and its
    /// sentence, kept beside the latest (`x-pushworker-error`) when it dies again.
    public static let firstError = "x-pushworker-first-error"
    public static let firstErrorMessage = "x-pushworker-first-error-message"
    /// On a chunk job: `"2/5"`; on a retry job of a job sent whole: `"retry"`. Never split again.
    public static let chunk = "x-pushworker-chunk"
    /// On a chunk, retry or moved job made from a delivery the broker delivered before: some of
    /// its devices may have their result already, so the worker asks the ledger first.
    public static let mayRepeat = "x-pushworker-may-repeat"
    /// On a retry job: the sends made so far to each device, in token order.
    public static let attempts = "x-pushworker-attempts"
    /// On a retry job of a job that counts badges: the count each device got, in token order,
    /// sent again instead of counted again.
    public static let badges = "x-pushworker-badges"
    /// On a retry job: how many delayed rounds came before it.
    public static let retryRound = "x-pushworker-retry-round"
    /// On a replayed dead letter: how often operators have replayed it.
    public static let replays = "x-pushworker-replays"
    /// On a job with `send_at` released from the schedule (unix milliseconds): sent now, never
    /// held again, whatever the worker's clock says of its `send_at`.
    public static let released = "x-pushworker-released-ms"
    /// On a chunk job: when it was published to its bulk queue (unix milliseconds), for the queue
    /// wait metric.
    public static let enqueuedAt = "x-pushworker-enqueued-ms"
    /// On a provider token a worker signed because APNs called the fleet's token expired: the
    /// `iat` (unix seconds) of the token it replaces, which every worker then drops at once.
    public static let supersedes = "x-pushworker-supersedes-iat"
    /// On an FCM access token told to the fleet: the service account's `client_email` it was
    /// granted to, the endpoint that granted it (`token_uri`), and when it lapses (unix seconds).
    public static let fcmAccount = "x-pushworker-fcm-account"
    public static let fcmTokenURI = "x-pushworker-fcm-token-uri"
    public static let fcmExpiresAt = "x-pushworker-fcm-expires-at"

    static func nowMilliseconds() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// The broker's bookkeeping of a message's past (dead-lettering, quorum delivery count): not
    /// carried over to the jobs the worker publishes from it, where it would only mislead.
    static let brokerBookkeeping: Set<String> = ["x-death", "x-delivery-count"]
    /// The broker's summary of a message's first and last death, beside `x-death`.
    static let brokerDeathSummary: Set<String> = [
        "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason",
        "x-last-death-exchange", "x-last-death-queue", "x-last-death-reason",
    ]
}
