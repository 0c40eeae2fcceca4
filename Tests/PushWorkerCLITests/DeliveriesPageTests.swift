import AMQP
import Foundation
import MockAPNs
import TestSupport
import Testing

/// The `/deliveries` page of a running worker, in a real browser (Debian's headless Chromium
/// driven by Selenium), against the ledger the worker wrote.
@Suite("The /deliveries page in a browser", .heavy, .usesBroker)
struct DeliveriesPageTests {
    static func token(_ index: Int) -> String { TestDeviceTokens.hex(index, series: 0x9A6E) }
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Browser/deliveries_page.py")

    @Test("off by default; with its bearer token a search by user, job or idempotency key shows one line per device, newest first, with outcome and reason, and Older the next page; a wrong token is refused")
    func page() async throws {
        let bearer = "page-token-\(UUID().uuidString)"
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("page-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let setup = try await WorkerProcessTests.setUp(
            faults: [MockAPNsFault(.reject(.unregistered), tokens: [Self.token(2)])],
            extra: """
                metrics_address: 127.0.0.1:0
                registry: {sqlite: \(directory.appendingPathComponent("registry.db").path)}
                ledger: {page_token_env: PUSHWORKER_TEST_PAGE_TOKEN}
                """)
        defer { Task { try? await setup.mock.shutdown() } }
        let worker = try RunningProgram.worker(config: setup.config, environment: ["PUSHWORKER_TEST_PAGE_TOKEN": bearer])
        try await worker.waitForLog("worker started")
        let port = try await worker.metricsPort()
        #expect(worker.log.contains("deliveries_page=on"), "\(worker.log)")
        let publisher = try await TestBroker.publisher()
        let results = try await TestBroker.consumer(queue: "\(setup.prefix).results", prefetch: 10)
        for (id, tokens) in [("first", [1, 2]), ("second", [1]), ("third", [3, 4, 5])] {
            let key = id == "third" ? #""idempotency_key": "order-3", "# : ""
            try await publisher.publish(.toQueue("\(setup.prefix).jobs", body: Array(
                #"{"id": "\#(id)", \#(key)"audience": {"tokens": [\#(tokens.map { "\"\(Self.token($0))\"" }.joined(separator: ","))]}, "payload": {"aps": {"alert": "hi"}}}"#.utf8)))
            while true {
                let delivery = try await results.next(within: .seconds(30))
                try await delivery.ack()
                if delivery.properties.type == "summary" { break }
            }
            try await Task.sleep(for: .milliseconds(20))  // two jobs, two instants: newest first is visible
        }

        // Without the bearer token the search answers 401 and shows nothing; the page itself holds no data.
        let bare = try #require(await HTTPProbe.get(port: port, "/deliveries/search?job=first"))
        #expect(bare.status == 401 && !bare.body.contains(Self.token(1)), "\(bare.body)")
        let shell = try #require(await HTTPProbe.get(port: port, "/deliveries"))
        #expect(shell.status == 200 && shell.body.contains("<form") && !shell.body.contains(Self.token(1)))

        // Kept after the test, for a look: the page as the browser drew it.
        let screenshot = FileManager.default.temporaryDirectory.appendingPathComponent("pushworker-deliveries-page.png").path
        let byToken = try await browse(port: port, bearer: bearer, field: "token", value: Self.token(1), screenshot: screenshot)
        #expect(byToken["title"] as? String == "pushworker deliveries")
        #expect((byToken["refused_class"] as? String) == "error" && (byToken["refused"] as? String)?.contains("bearer token") == true, "\(byToken)")
        let rows = try #require(byToken["rows"] as? [[String]], "\(byToken)")
        #expect(rows.map { $0[1] } == ["second", "first"], "newest first: \(rows)")
        #expect(rows.allSatisfy { $0[2] == Self.token(1) && $0[3] == "apns" && $0[5] == "delivered" && $0[6] == "200" }, "\(rows)")
        #expect((byToken["status"] as? String)?.hasPrefix("2 deliveries") == true, "\(byToken)")

        let byJob = try await browse(port: port, bearer: bearer, field: "job", value: "first", screenshot: screenshot)
        let jobRows = try #require(byJob["rows"] as? [[String]], "\(byJob)")
        #expect(Set(jobRows.map { $0[2] }) == [Self.token(1), Self.token(2)])
        #expect(jobRows.contains { $0[2] == Self.token(2) && $0[5] == "rejected" && $0[6] == "410" && $0[7] == "Unregistered" }, "\(jobRows)")
        #expect((byJob["row_classes"] as? [String])?.contains("rejected") == true)

        // By the key alone, two lines a page: Older shows the next page until there is none.
        let byKey = try await browse(port: port, bearer: bearer, field: "key", value: "order-3", screenshot: screenshot, limit: 2)
        let pages = try #require(byKey["pages"] as? [[String: Any]], "\(byKey)")
        let pageRows = pages.map { ($0["rows"] as? [[String]]) ?? [] }
        #expect(pageRows.map(\.count) == [2, 1], "\(byKey)")
        #expect(pageRows.joined().allSatisfy { $0[1] == "third" } && Set(pageRows.joined().map { $0[2] }) == Set([3, 4, 5].map(Self.token)), "\(pageRows)")
        #expect((pages.first?["status"] as? String)?.contains("older ones follow") == true && (pages.last?["status"] as? String)?.contains("(3 to 3)") == true, "\(pages)")
        let badCursor = try #require(await HTTPProbe.get(port: port, "/deliveries/search?key=order-3&after=nonsense", headers: [("authorization", "Bearer \(bearer)")]))
        #expect(badCursor.status == 400 && badCursor.body.contains("after"), "\(badCursor.body)")
        print("deliveries page screenshot: \(screenshot)")

        #expect(try await worker.stop() == 0, "\(worker.log)")
        await results.close()
        await publisher.close()
    }

    /// What the browser showed, as the script prints it.
    private func browse(port: Int, bearer: String, field: String, value: String, screenshot: String, limit: Int? = nil) async throws -> [String: Any] {
        let run = try await Program.running(
            [Self.script.path, "http://127.0.0.1:\(port)", bearer, field, value, screenshot] + (limit.map { ["\($0)"] } ?? []),
            program: URL(fileURLWithPath: "/usr/bin/python3"), killAfter: .seconds(180))
        #expect(run.status == 0, "the browser script failed: \(run.standardError)")
        return try #require(try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any], "\(run.standardOutput)\(run.standardError)")
    }
}
