import APNs
import APNsHTTP2
import Foundation
import MockAPNs
import TestSupport
import Testing

@Suite("APNs connection faults and volume", .heavy)
struct ConnectionFaultTests {
    /// A request's deadline runs from when it is queued, so it covers the whole burst's wait for
    /// streams: generous, as the suite's bursts run at once on a busy machine. A request the client
    /// loses still fails the test, its answer a timeout.
    static let requestTimeout: Duration = .seconds(120)

    /// `batched`: one batch send of all of them, as a job's fan-out; else a task per notification.
    private func burst(_ client: APNsClient, count: Int, batched: Bool = false) async throws -> [Int: Int] {
        if batched {
            let results = await client.send((0..<count).map { MockFixture.request($0) })
            return Dictionary(uniqueKeysWithValues: try results.enumerated().map { ($0.offset, try $0.element.get().status) })
        }
        return try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for index in 0..<count { group.addTask { (index, try await client.send(MockFixture.request(index)).status) } }
            var statuses: [Int: Int] = [:]
            for try await (index, status) in group {
                #expect(statuses[index] == nil, "answered twice: \(index)")
                statuses[index] = status
            }
            return statuses
        }
    }

    @Test("GOAWAY mid-burst (one by one, or in one batch): every notification is answered once and delivered once", arguments: APNsTransport.allCases, [false, true])
    func goAway(transport: APNsTransport, batched: Bool) async throws {
        let fixture = try await MockFixture.start { $0.faults = [MockAPNsFault(.goAway(afterRequests: 150), times: 2)] }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport) { $0.connections = 2; $0.maxConcurrentStreams = 200; $0.requestTimeout = Self.requestTimeout }
        let statuses = try await burst(client, count: 1000, batched: batched)
        #expect(statuses.count == 1000 && statuses.values.allSatisfy { $0 == 200 })
        let counts = fixture.server.deliveryCounts
        #expect(counts.count == 1000 && counts.values.allSatisfy { $0 == 1 }, "delivered twice: \(counts.filter { $0.value > 1 }.keys.sorted())")
        #expect(fixture.server.connectionCount >= 3, "GOAWAY should have forced new connections")
        client.shutdown()
    }

    @Test("an abrupt close after GOAWAY loses answers of delivered notifications: each is sent again and counted, every notification answered once", arguments: APNsTransport.allCases, [false, true])
    func goAwayAbrupt(transport: APNsTransport, batched: Bool) async throws {
        let fixture = try await MockFixture.start { $0.faults = [MockAPNsFault(.goAwayAbrupt(afterRequests: 150), times: 2)] }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport) { $0.connections = 2; $0.maxConcurrentStreams = 200; $0.requestTimeout = Self.requestTimeout }
        let requests = (0..<1000).map { MockFixture.request($0) }
        var sends: [String: Int] = [:]
        if batched {
            for (request, result) in zip(requests, await client.send(requests)) { sends[request.deviceToken] = try result.get().sends }
        } else {
            try await withThrowingTaskGroup(of: (String, Int).self) { group in
                for request in requests { group.addTask { (request.deviceToken, try await client.send(request).sends) } }
                for try await (token, count) in group {
                    #expect(sends[token] == nil, "answered twice: \(token)")
                    sends[token] = count
                }
            }
        }
        #expect(sends.count == 1000)
        let counts = fixture.server.deliveryCounts
        #expect(counts.count == 1000, "lost: \(1000 - counts.count)")
        let twice = counts.filter { $0.value > 1 }
        // Each firing delivers one notification whose answer never leaves the server.
        #expect(twice.count >= 2)
        // Every notification delivered twice was sent again, and its answer says so.
        #expect(twice.keys.allSatisfy { (sends[$0] ?? 0) >= 2 }, "\(twice.keys.map { ($0.suffix(4), sends[$0] ?? 0) })")
        client.shutdown()
    }

    @Test("connection resets mid-burst (one by one, or in one batch): every notification is still answered exactly once", arguments: APNsTransport.allCases, [false, true])
    func reset(transport: APNsTransport, batched: Bool) async throws {
        let fixture = try await MockFixture.start { $0.faults = [MockAPNsFault(.resetConnection(afterRequests: 200), times: 2)] }
        defer { Task { try? await fixture.server.shutdown() } }
        let client = fixture.client(transport: transport) { $0.connections = 2; $0.maxConcurrentStreams = 200; $0.requestTimeout = Self.requestTimeout }
        let statuses = try await burst(client, count: 1000, batched: batched)
        #expect(statuses.count == 1000 && statuses.values.allSatisfy { $0 == 200 })
        #expect(Set(fixture.server.recorded.map(\.token)).count == 1000)
        #expect(fixture.server.connectionCount >= 3)
        client.shutdown()
    }

    @Test("10,000 notifications over 2 connections: none lost, none duplicated", arguments: APNsTransport.allCases)
    func tenThousand(transport: APNsTransport) async throws {
        let fixture = try await MockFixture.start()
        defer { Task { try? await fixture.server.shutdown() } }
        // 100 streams a connection: the mock runs unoptimised in debug test builds, and a deeper
        // queue would only make requests wait past their timeout on a busy CI machine.
        let client = fixture.client(transport: transport) { $0.connections = 2; $0.maxConcurrentStreams = 100; $0.requestTimeout = Self.requestTimeout }
        let statuses = try await burst(client, count: 10_000)
        #expect(fixture.server.connectionErrors.isEmpty, "\(fixture.server.connectionErrors.prefix(5))")
        #expect(statuses.count == 10_000 && statuses.values.allSatisfy { $0 == 200 })
        let counts = fixture.server.deliveryCounts
        #expect(counts.count == 10_000 && counts.values.allSatisfy { $0 == 1 })
        #expect(fixture.server.connectionCount == 2)
        #expect(Set(fixture.server.recorded.map(\.connection)).count == 2)
        client.shutdown()
    }
}
