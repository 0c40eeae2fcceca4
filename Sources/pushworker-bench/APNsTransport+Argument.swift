import APNsHTTP2
import ArgumentParser

/// `--transport nghttp2|curl` on the benchmarks, so both transports are measured by one command.
extension APNsTransport: ExpressibleByArgument {}
