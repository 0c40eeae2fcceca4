import Foundation
import NIOCore

/// One client connection's counters. Touched only on the connection's event loop, which its
/// streams share, so it needs no lock.
final class MockConnection: @unchecked Sendable {
    let number: Int
    /// Requests received and answered on this connection.
    var received = 0
    var answered = 0
    /// Requests received and not yet answered.
    var inFlight = 0
    /// Whether the stream limit has been raised from 1 (after the first accepted request).
    var raisedStreamLimit = false
    /// Whether the client presented a certificate the server trusts; read once per connection.
    var certificateAuthenticated: Bool?
    var closing = false
    var verifiedToken: (jwt: String, issuedAt: Date)?
    /// After a GOAWAY: the last stream the server promised to process.
    var goAwayLastStream: Int?
    /// The highest stream the client has opened: a GOAWAY names it, so that every stream the
    /// server has taken (and may have delivered) is one the GOAWAY says it processes.
    var highestStream = 0
    /// Answers handed to the connection whose bytes have not reached the socket yet.
    var answersUnwritten = 0

    init(number: Int) {
        self.number = number
    }
}
