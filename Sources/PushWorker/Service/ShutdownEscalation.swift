import Foundation
import Logging
import ServiceLifecycle
import UnixSignals

/// The two ways out of a graceful shutdown that ServiceLifecycle cannot take for the worker.
///
/// A second SIGTERM or SIGINT: the group stops listening after the first, and will not take the
/// same signal as a cancellation signal, so this service watches them and exits 130 at once.
///
/// Past `shutdown_grace_seconds` the group (its `maximumGracefulShutdownDuration`) cancels its
/// services, but the jobs in hand do not end on cancellation (an APNs exchange runs to its
/// answer), so the group would wait on. Cancelled before its own turn to stop (first in the
/// group, it stops last), this service exits 1 instead.
///
/// Exiting loses nothing: the jobs not acknowledged are redelivered to another worker.
struct ShutdownEscalation: Service {
    private let signals: UnixSignalsSequence
    private let grace: Int
    private let logger: Logger

    /// Traps the signals now, before the group runs, so that none sent once the worker has
    /// started escapes this service. A first signal while the services still wait for their
    /// broker ends their waiting at once (`untilGracefulShutdown`).
    init(grace: Int, logger: Logger) async {
        signals = await UnixSignalsSequence(trapping: .sigterm, .sigint)
        self.grace = grace
        self.logger = logger
    }

    func run() async {
        var received = 0
        var firstSignal: ContinuousClock.Instant?
        for await _ in signals.cancelOnGracefulShutdown() {
            received += 1
            if firstSignal == nil { firstSignal = .now }
            guard received == 1 else {
                logger.warning("second signal: exiting now; unacknowledged jobs will be redelivered")
                exit(130)
            }
            logger.notice("signal received: finishing the jobs in hand, then exiting (signal again to exit now)")
        }
        // Cancelled before its turn once the grace period has run out since the signal: the group
        // gave up on the drain. Cancelled earlier, or without a signal: a service failed (during
        // the drain, too), and the group's error, thrown once every service has stopped, says
        // which. (Half a second of slack: the group's timer starts as it begins the shutdown,
        // a moment after the signal was seen here.)
        if Task.isCancelled, let firstSignal, !Task.isShuttingDownGracefully,
            ContinuousClock.now - firstSignal >= .seconds(grace) - .milliseconds(500)
        {
            logger.error("shutdown grace period of \(grace) s exceeded; exiting")
            exit(1)
        }
    }
}
