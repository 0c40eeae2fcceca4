import ArgumentParser
import PushWorker

/// `bench e2e --results all|batched|failures|none`.
extension PushJob.ResultsMode: ExpressibleByArgument {}
