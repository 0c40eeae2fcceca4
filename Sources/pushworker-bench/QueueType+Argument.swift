import ArgumentParser
import PushWorker

/// `--results-type quorum|classic` on `bench e2e`, so the cost of the default queue type is measured
/// beside the classic one by one command.
extension WorkerSettings.QueueType: ExpressibleByArgument {}
