import APNsHTTP2
import Foundation
import Logging
import PushWorker
import TestSupport
import Testing

@Suite("Configuration: apps")
struct PushWorkerConfigurationTests {
    private func temporaryFile(_ text: String) throws -> String {
        try TemporaryFile.write(text, suffix: ".yaml")
    }

    @Test("token and certificate apps load, with keys from files and the environment")
    func loads() throws {
        let p8 = try TestKeys.newP8()
        let keyFile = try temporaryFile(p8)
        let pki = try TestKeys.newPKI()
        let yaml = """
            apps:
              - name: news
                topic: com.example.news
                environment: production
                connections: 4
                token: {key_file: \(keyFile), key_id: ABC123DEFG, team_id: TEAM123456}
              - name: chat
                topic: com.example.chat
                environment: sandbox
                port: 2197
                token: {key_env: CHAT_KEY, key_id: KEY2222222, team_id: TEAM222222}
              - name: legacy
                topic: com.example.legacy
                environment: sandbox
                url: https://127.0.0.1:9999
                certificate: {file: \(pki.appendingPathComponent("client.p12").path), password_env: LEGACY_PASSWORD}
            """
        let file = try temporaryFile(yaml)
        let configuration = try PushWorkerConfiguration.load(file: file)
        #expect(configuration.apps.map(\.name) == ["news", "chat", "legacy"])
        let environment = ["CHAT_KEY": p8, "LEGACY_PASSWORD": "test", "PUSHWORKER_APNS_URL_CHAT": "https://127.0.0.1:2197"]

        let news = try configuration.apps[0].clientConfiguration(file: file, index: 0, environment: environment)
        #expect(news.baseURL == "https://api.push.apple.com:443")
        #expect(news.connections == 4)
        let chat = try configuration.apps[1].clientConfiguration(file: file, index: 1, environment: environment)
        #expect(chat.baseURL == "https://127.0.0.1:2197")
        let legacy = try configuration.apps[2].clientConfiguration(file: file, index: 2, environment: environment)
        guard case .certificate(let identity) = legacy.authentication else { Issue.record("not certificate auth"); return }
        #expect(identity.password == "test")
        #expect(legacy.baseURL == "https://127.0.0.1:9999")
        #expect(configuration.app(named: "chat")?.index == 1)
        #expect(configuration.app(named: nil) == nil)
    }

    @Test("the transport is nghttp2 unless an app asks for curl; a proxy nghttp2 cannot tunnel through is refused naming the key")
    func transport() throws {
        let keyFile = try temporaryFile(try TestKeys.newP8())
        var count = 0
        func app(_ extra: String) -> String {
            count += 1
            return "  - name: a\(count)\n    topic: t\n    environment: sandbox\n    token: {key_file: \(keyFile), key_id: ABC123DEFG, team_id: DEF123GHIJ}\n\(extra)"
        }
        let yaml = "apps:\n" + app("") + app("    transport: curl\n    proxy: socks5://10.0.0.1:1080\n")
            + app("    ping_interval_seconds: 0\n    proxy: http://user:secret@10.0.0.1:3128\n") + app("    proxy: https://10.0.0.1:3128\n")
            + app("    ping_interval_seconds: 7200\n") + app("    transport: curl\n    proxy: ftp://10.0.0.1:21\n")
        let file = try temporaryFile(yaml)
        let configuration = try PushWorkerConfiguration.load(file: file)
        let plain = try configuration.apps[0].clientConfiguration(file: file, index: 0, environment: [:])
        #expect(plain.transport == .nghttp2)
        #expect(plain.pingInterval == .seconds(60))
        let curl = try configuration.apps[1].clientConfiguration(file: file, index: 1, environment: [:])
        #expect(curl.transport == .curl && curl.proxy == "socks5://10.0.0.1:1080")
        let noPing = try configuration.apps[2].clientConfiguration(file: file, index: 2, environment: [:])
        #expect(noPing.pingInterval == nil && noPing.transport == .nghttp2)
        #expect(throws: ConfigurationError.self) { try configuration.apps[3].clientConfiguration(file: file, index: 3, environment: [:]) }
        do {
            _ = try configuration.apps[3].clientConfiguration(file: file, index: 3, environment: [:])
        } catch {
            #expect("\(error)".contains("apps[3].proxy: a https:// proxy needs transport: curl"), "\(error)")
        }
        do {
            _ = try configuration.apps[4].clientConfiguration(file: file, index: 4, environment: [:])
            Issue.record("accepted a 2-hour PING interval")
        } catch {
            #expect("\(error)".contains("apps[4].ping_interval_seconds"), "\(error)")
        }
        do {
            _ = try configuration.apps[5].clientConfiguration(file: file, index: 5, environment: [:])
            Issue.record("accepted an ftp:// proxy")
        } catch {
            #expect("\(error)".contains("apps[5].proxy: 'ftp' is not an http://"), "\(error)")
        }
    }

    @Test(
        "a bad configuration names the file and the key",
        arguments: [
            ("apps:\n  - name: a\n    environment: sandbox\n    token: {key_file: x, key_id: k, team_id: t}\n", "apps[0].topic: is missing"),
            ("apps:\n  - name: a\n    topic: t\n    environment: staging\n    token: {key_file: x, key_id: k, team_id: t}\n", "apps[0].environment: 'staging' is not one of production, sandbox"),
            ("apps:\n  - name: a\n    topic: t\n    environment: sandbox\n    connections: many\n", "apps[0].connections: should be a whole number"),
            ("apps:\n  - name: a\n    topic: t\n    environment: sandbox\n    transport: quic\n", "apps[0].transport: 'quic' is not one of nghttp2, curl"),
            ("apps:\n  - name: a\n    topic: t\n    environment: sandbox\n  - name: a\n    topic: u\n    environment: sandbox\n", "apps[1].name: 'a' is used by another app"),
            ("apps:\n  - name: \"a#b\"\n    topic: t\n    environment: sandbox\n", "apps[0].name: 'a#b' contains '#'"),
            ("apps: [", "not valid YAML"),
            ("apps:\n  - name: a\n    topic: t\n    environment: sandbox\n    token: {key_id: k}\n", "apps[0].token.team_id: is missing"),
            ("metrics_address: 9090\napps: []\n", "metrics_address: '9090' is not HOST:PORT"),
            ("metrics_address: \"localhost:http\"\napps: []\n", "metrics_address: 'localhost:http' is not HOST:PORT"),
            ("ledger: {retension_days: 7}\napps: []\n", "ledger.retension_days: unknown key; did you mean retention_days?"),
            ("ledger: maybe\napps: []\n", "ledger: 'maybe' is not off, on or a mapping"),
            ("apps:\n  - name: a\n    topic: t\n    environment: sandbox\n    caps: [{types: [promo], max: 0, per: 24h}]\n", "apps[0].caps[0].max: 0 is not a cap"),
            ("apps:\n  - name: a\n    topic: t\n    environment: sandbox\n    caps: [{types: [promo], max: 3, per: tomorrow}]\n", "apps[0].caps[0].per: 'tomorrow' is not a duration"),
            ("apps:\n  - name: a\n    topic: t\n    environment: sandbox\n    caps: [{types: [], max: 3, per: 24h}]\n", "apps[0].caps[0].types: a cap names at least one"),
            ("apps:\n  - name: a\n    topic: t\n    environment: sandbox\n    time_zone: Berlin\n", "apps[0].time_zone: 'Berlin' is not an IANA time zone"),
            ("apps:\n  - name: a\n    topic: t\n    environment: sandbox\n    quiet_hours: later\n", "apps[0].quiet_hours: 'later' is not defer, drop or ignore"),
        ])
    func invalid(yaml: String, expected: String) throws {
        let file = try temporaryFile(yaml)
        do {
            _ = try PushWorkerConfiguration.load(file: file)
            Issue.record("accepted")
        } catch {
            #expect("\(error)".hasPrefix(file + ": "))
            #expect("\(error)".contains(expected), "\(error)")
        }
    }

    @Test("caps, time_zone and quiet_hours of an app read; caps without a registry or with the ledger off are refused naming the key")
    func capsAndTime() throws {
        let app = "apps:\n  - name: a\n    topic: t\n    environment: sandbox\n    time_zone: Europe/Berlin\n    quiet_hours: drop\n    caps: [{types: [promo, sale], max: 3, per: 24h}, {types: [digest], max: 1, per: 7d}]\n"
        let read = try PushWorkerConfiguration.parse("registry: {sqlite: r.db}\n" + app, file: "f").apps[0]
        #expect(read.caps == [FrequencyCap(types: ["promo", "sale"], max: 3, per: 86_400), FrequencyCap(types: ["digest"], max: 1, per: 604_800)])
        #expect(read.timeZone == "Europe/Berlin" && read.quietHours == .drop)
        for (prefix, words) in [("", "users are known only with a registry"), ("registry: {sqlite: r.db}\nledger: off\n", "ledger is off")] {
            let file = try temporaryFile(prefix + app)
            #expect { try WorkerPlan.load(file: file) } throws: { "\($0)".contains("apps[0].caps") && "\($0)".contains(words) }
        }
    }

    @Test("ledger: on by default for 30 days; off (as a word or false); a retention and a file of its own")
    func ledger() throws {
        #expect(try PushWorkerConfiguration.parse("apps: []\n", file: "f").worker.ledger == WorkerSettings.Ledger())
        #expect(WorkerSettings.Ledger().enabled && WorkerSettings.Ledger().retentionDays == 30)
        for off in ["off", "false", "\"off\""] {
            #expect(try PushWorkerConfiguration.parse("ledger: \(off)\napps: []\n", file: "f").worker.ledger.enabled == false, "\(off)")
        }
        let kept = try PushWorkerConfiguration.parse("ledger: {retention_days: 7, sqlite: ledger.db}\napps: []\n", file: "f").worker.ledger
        #expect(kept.enabled && kept.retentionDays == 7 && kept.sqlite == "ledger.db")
    }

    @Test("a ledger file that cannot be opened fails the start naming ledger.sqlite; no registry and no file: no ledger")
    func ledgerFile() async throws {
        let logger = Logger(label: "test.ledger")
        let yaml = "ledger: {sqlite: /nonexistent-\(UUID().uuidString.prefix(6))/ledger.db}\napps: []\n"
        let plan = try WorkerPlan(try PushWorkerConfiguration.parse(yaml, file: "/tmp/f.yaml"), file: "/tmp/f.yaml", environment: [:])
        do {
            _ = try await plan.openStores(rebuildingIndexes: true, environment: [:], logger: logger)
            Issue.record("opened a ledger in a folder that does not exist")
        } catch {
            #expect("\(error)".contains("/tmp/f.yaml: ledger.sqlite: cannot open the ledger there"), "\(error)")
            #expect("\(error)".contains("ledger: off"), "\(error)")
        }
        // The ranges are the plan's: `run` and `config check` refuse them alike, naming the key.
        for (yaml, expected) in [
            ("ledger: {retention_days: 0}\n", "ledger.retention_days: 0 is not between 1 and 3650"),
            ("ledger: {retention_days: 1, idempotency_hours: 48}\n", "ledger.idempotency_hours: 48 is not between 1 and the retention (24 hours)"),
        ] {
            #expect(throws: ConfigurationError.self) { try WorkerPlan(try PushWorkerConfiguration.parse(yaml + "apps: []\n", file: "/tmp/f.yaml"), file: "/tmp/f.yaml", environment: [:]) }
            do {
                _ = try EffectiveConfiguration.check(try PushWorkerConfiguration.parse(yaml + "apps: []\n", file: "/tmp/f.yaml"), file: "/tmp/f.yaml", environment: [:])
                Issue.record("config check accepted \(yaml)")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
        }
        let none = try WorkerPlan(try PushWorkerConfiguration.parse("apps: []\n", file: "/tmp/f.yaml"), file: "/tmp/f.yaml", environment: [:])
        #expect(try await none.openStores(rebuildingIndexes: true, environment: [:], logger: logger).ledger == nil)
    }

    @Test("registry.postgres_connections: 8 unless set and printed by config check; out of range, or on SQLite, refused naming the key before connecting")
    func postgresConnections() async throws {
        let url = "postgres://pushworker:hunter2@127.0.0.1:1/pushworker"
        #expect(try PushWorkerConfiguration.parse("registry: {postgres: \"\(url)\"}\napps: []\n", file: "/tmp/f.yaml").worker.registry?.postgresConnections == nil)
        let twenty = try EffectiveConfiguration.check(
            try PushWorkerConfiguration.parse("registry: {postgres: \"\(url)\", postgres_connections: 20}\napps: []\n", file: "/tmp/f.yaml"), file: "/tmp/f.yaml", environment: [:])
        #expect(twenty.contains("postgres_connections: 20"), "\(twenty)")
        #expect(!twenty.contains("hunter2"))
        for (registry, expected) in [
            ("{postgres: \"\(url)\", postgres_connections: 0}", "registry.postgres_connections: 0 is not between 1 and 64"),
            ("{postgres: \"\(url)\", postgres_connections: 65}", "registry.postgres_connections: 65 is not between 1 and 64"),
            ("{sqlite: r.db, postgres_connections: 4}", "registry.postgres_connections: is for a PostgreSQL registry; this one is SQLite"),
            // The default number, set on SQLite, is a mistake all the same.
            ("{sqlite: r.db, postgres_connections: 8}", "registry.postgres_connections: is for a PostgreSQL registry; this one is SQLite"),
        ] {
            let configuration = try PushWorkerConfiguration.parse("registry: \(registry)\napps: []\n", file: "/tmp/f.yaml")
            do {
                _ = try EffectiveConfiguration.check(configuration, file: "/tmp/f.yaml", environment: [:])
                Issue.record("config check accepted \(registry)")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
            // The worker refuses it too, before it tries the server (port 1 answers nobody).
            let plan = try WorkerPlan(configuration, file: "/tmp/f.yaml", environment: [:])
            do {
                _ = try await plan.openStores(rebuildingIndexes: true, environment: [:], logger: Logger(label: "test.registry"))
                Issue.record("opened a registry with \(registry)")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
            }
        }
    }

    @Test("lanes.due_prefetch and lanes.now_prefetch: 64 unless set, large bodies 8 MiB at a time; out of range is refused naming the key, by run and config check alike")
    func duePrefetch() throws {
        let defaults = try PushWorkerConfiguration.parse("apps: []\n", file: "/tmp/f.yaml").worker.lanes
        #expect(defaults.duePrefetch == 64 && defaults.nowPrefetch == 64 && defaults.nowLargeJobBytes == 8 << 20)
        #expect(try PushWorkerConfiguration.parse("lanes: {now_prefetch: 16}\napps: []\n", file: "/tmp/f.yaml").worker.lanes.nowPrefetch == 16)
        #expect(try PushWorkerConfiguration.parse("lanes: {now_large_job_bytes: 1048576}\napps: []\n", file: "/tmp/f.yaml").worker.lanes.nowLargeJobBytes == 1 << 20)
        #expect(try PushWorkerConfiguration.parse("lanes: {due_prefetch: 200}\napps: []\n", file: "/tmp/f.yaml").worker.lanes.duePrefetch == 200)
        let yaml = "lanes: {due_prefetch: 0}\napps: []\n"
        #expect(throws: ConfigurationError.self) { try WorkerPlan(try PushWorkerConfiguration.parse(yaml, file: "/tmp/f.yaml"), file: "/tmp/f.yaml", environment: [:]) }
        do {
            _ = try EffectiveConfiguration.check(try PushWorkerConfiguration.parse(yaml, file: "/tmp/f.yaml"), file: "/tmp/f.yaml", environment: [:])
            Issue.record("config check accepted \(yaml)")
        } catch {
            #expect("\(error)".contains("lanes.due_prefetch: 0 is not between 1 and 10000"), "\(error)")
        }
    }

    @Test("the /deliveries page: its token variable must be set and long, on an endpoint that serves, with a ledger; never printed")
    func deliveriesPage() throws {
        func plan(_ yaml: String, _ environment: [String: String]) throws -> WorkerPlan {
            try WorkerPlan(try PushWorkerConfiguration.parse(yaml + "apps: []\n", file: "/tmp/f.yaml"), file: "/tmp/f.yaml", environment: environment)
        }
        let page = "ledger: {page_token_env: PAGE_TOKEN}\n"
        #expect(try plan("", [:]).deliveriesPageToken == nil, "off by default")
        #expect(try plan(page, ["PAGE_TOKEN": "0123456789abcdefXYZ"]).deliveriesPageToken == "0123456789abcdefXYZ")
        for (yaml, environment, expected) in [
            (page, [:], "ledger.page_token_env: environment variable PAGE_TOKEN is not set"),
            (page, ["PAGE_TOKEN": "short-secret"], "PAGE_TOKEN holds 12 characters; the page's bearer token needs at least 16"),
            ("metrics_address: null\n" + page, ["PAGE_TOKEN": "0123456789abcdefXYZ"], "served on metrics_address, which is null"),
        ] as [(String, [String: String], String)] {
            do {
                _ = try plan(yaml, environment)
                Issue.record("accepted: \(yaml)")
            } catch {
                #expect("\(error)".contains(expected), "\(error)")
                #expect(!"\(error)".contains("short-secret"), "the token is printed")
            }
        }
        let checked = try EffectiveConfiguration.check(try PushWorkerConfiguration.parse(page + "apps: []\n", file: "/tmp/f.yaml"), file: "/tmp/f.yaml",
            environment: ["PAGE_TOKEN": "0123456789abcdefXYZ"])
        #expect(checked.contains("page_token_env: PAGE_TOKEN") && !checked.contains("0123456789abcdefXYZ"), "\(checked)")
    }

    @Test("credentials that cannot be used name the key, and never print a secret")
    func credentials() throws {
        let yaml = """
            apps:
              - name: a
                topic: t
                environment: sandbox
                token: {key_env: APP_KEY, key_id: k, team_id: t}
              - name: b
                topic: t
                environment: sandbox
                port: 8443
                token: {key_file: /nonexistent.p8, key_id: k, team_id: t}
            """
        let file = try temporaryFile(yaml)
        let configuration = try PushWorkerConfiguration.load(file: file)
        do {
            _ = try configuration.apps[0].clientConfiguration(file: file, index: 0, environment: [:])
            Issue.record("accepted a missing variable")
        } catch {
            #expect("\(error)" == "\(file): apps[0].token.key_env: environment variable APP_KEY is not set (nor APP_KEY_FILE)")
        }
        do {
            _ = try configuration.apps[0].clientConfiguration(file: file, index: 0, environment: ["APP_KEY": "SECRET-NOT-A-KEY"])
            Issue.record("accepted a bad key")
        } catch {
            #expect("\(error)".contains("apps[0].token.key_env"))
            #expect(!"\(error)".contains("SECRET-NOT-A-KEY"))
        }
        do {
            _ = try configuration.apps[1].clientConfiguration(file: file, index: 1, environment: [:])
            Issue.record("accepted a missing key file")
        } catch {
            #expect("\(error)".contains("apps[1].token.key_file: cannot read '/nonexistent.p8'"))
        }
    }

    @Test("key_id and team_id are Apple's 10 upper-case letters or digits; a key file named AuthKey_<KEY_ID>.p8 gives its id, and one naming another id is refused")
    func appleIdentifiers() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let named = directory.appendingPathComponent("AuthKey_ABCDE12345.p8").path
        try Data(try TestKeys.newP8().utf8).write(to: URL(fileURLWithPath: named))
        let plain = try temporaryFile(try TestKeys.newP8())
        let cases: [(String, String?)] = [
            ("{key_file: \(named), team_id: DEF123GHIJ}", nil),
            ("{key_file: \(named), key_id: ABCDE12345, team_id: DEF123GHIJ}", nil),
            ("{key_file: \(plain), key_id: k, team_id: DEF123GHIJ}", "apps[0].token.key_id: 'k' is not 10 upper-case letters or digits"),
            ("{key_file: \(plain), key_id: abcde12345, team_id: DEF123GHIJ}", "apps[0].token.key_id: 'abcde12345' is not 10 upper-case"),
            ("{key_file: \(plain), key_id: ABCDE12345, team_id: DEF123GHI}", "apps[0].token.team_id: 'DEF123GHI' is not 10 upper-case"),
            ("{key_file: \(plain), team_id: DEF123GHIJ}", "apps[0].token.key_id: is missing: give it, or keep the key file's name as Apple delivers it (AuthKey_<KEY_ID>.p8)"),
            ("{key_file: \(named), key_id: ZZZZZ99999, team_id: DEF123GHIJ}", "apps[0].token.key_id: 'ZZZZZ99999' is not the id in the key file's name (AuthKey_ABCDE12345.p8)"),
        ]
        for (token, expected) in cases {
            let file = try temporaryFile("apps:\n  - {name: a, topic: t, environment: sandbox, token: \(token)}\n")
            let configuration = try PushWorkerConfiguration.load(file: file)
            do {
                let client = try configuration.apps[0].clientConfiguration(file: file, index: 0, environment: [:])
                #expect(expected == nil, "accepted \(token)")
                guard case .token(let source) = client.authentication else { Issue.record("not token auth"); continue }
                #expect(source.keyID == "ABCDE12345" && source.teamID == "DEF123GHIJ")
            } catch {
                #expect(expected.map { "\(error)" == "\(file): " + $0 || "\(error)".hasPrefix("\(file): " + $0) } == true, "\(token): \(error)")
            }
        }
    }

    @Test("channel management goes to the environment's management host, to url when one is set, or to management_url; a management_url that is not https names the key")
    func managementURL() throws {
        let credentials = "certificate: {file: \(MockAPNsFixture.path("client.pem")), key_file: \(MockAPNsFixture.path("client.key"))}"
        let configuration = try PushWorkerConfiguration.parse("""
            apps:
              - {name: a, topic: t, environment: production, \(credentials)}
              - {name: b, topic: t, environment: sandbox, \(credentials)}
              - {name: c, topic: t, environment: sandbox, url: "https://127.0.0.1:1", \(credentials)}
              - {name: d, topic: t, environment: sandbox, url: "https://gateway:443", management_url: "https://gateway:2195/", \(credentials)}
            """, file: "p.yaml")
        let urls = try configuration.apps.enumerated().map { try $0.element.clientConfiguration(file: "p.yaml", index: $0.offset).managementURL }
        #expect(urls == [
            "https://api-manage-broadcast.push.apple.com:2196", "https://api-manage-broadcast.sandbox.push.apple.com:2195",
            "https://127.0.0.1:1", "https://gateway:2195",
        ])
        let plain = try PushWorkerConfiguration.parse("apps:\n  - {name: a, topic: t, environment: sandbox, management_url: \"http://x\", \(credentials)}\n", file: "p.yaml")
        #expect(throws: (any Error).self) { _ = try plain.apps[0].clientConfiguration(file: "p.yaml", index: 0) }
        do { _ = try plain.apps[0].clientConfiguration(file: "p.yaml", index: 0) } catch {
            #expect("\(error)".contains("apps[0].management_url"), "\(error)")
        }
    }

    @Test("default_results: one of the job's results modes; anything else names the key and the modes")
    func defaultResults() throws {
        let app = "topic: t, environment: sandbox, url: \"https://127.0.0.1:1\", certificate: {file: f, format: pem}"
        let configuration = try PushWorkerConfiguration.parse("apps:\n  - {name: a, \(app), default_results: batched}\n  - {name: b, \(app)}\n", file: "p.yaml")
        #expect(configuration.apps.map(\.defaultResults) == [.batched, nil])
        do {
            _ = try PushWorkerConfiguration.parse("apps:\n  - {name: a, \(app), default_results: packed}\n", file: "p.yaml")
            Issue.record("accepted packed")
        } catch {
            #expect("\(error)".hasPrefix("p.yaml: apps[0].default_results: 'packed' is not all, batched, failures or none"), "\(error)")
        }
    }

    @Test("default_expiration: immediate or seconds; anything else names the key")
    func defaultExpiration() throws {
        let app = "topic: t, environment: sandbox, url: \"https://127.0.0.1:1\", certificate: {file: f, format: pem}"
        let file = try temporaryFile("""
            apps:
              - {name: a, \(app), default_expiration: immediate}
              - {name: b, \(app), default_expiration: 3600}
              - {name: c, \(app), default_expiration: 0}
              - {name: d, \(app)}
            """)
        let configuration = try PushWorkerConfiguration.load(file: file)
        #expect(configuration.apps.map(\.defaultExpiration) == [.immediate, .afterSeconds(3600), .immediate, nil])
        for (value, expected) in [
            ("soon", "apps[0].default_expiration: 'soon' is not immediate or a number of seconds"),
            ("-5", "apps[0].default_expiration: -5 is not between 0 (immediate) and 31536000 seconds"),
            ("40000000", "apps[0].default_expiration: 40000000 is not between 0"),
        ] {
            do {
                _ = try PushWorkerConfiguration.parse("apps:\n  - {name: a, \(app), default_expiration: \(value)}\n", file: "p.yaml")
                Issue.record("accepted \(value)")
            } catch {
                #expect("\(error)".hasPrefix("p.yaml: " + expected), "\(error)")
            }
        }
    }

    @Test("ranges are checked where their section is read: the file is refused as it is loaded, naming the key")
    func rangesWhereRead() throws {
        for (yaml, expected) in [
            ("chunk_size: 0", "f.yaml: chunk_size: 0 is not between 1 and 10000"),
            ("chunk_size: 20000", "f.yaml: chunk_size: 20000 is not between 1 and 10000"),
            ("lanes: {now_prefetch: 0}", "f.yaml: lanes.now_prefetch: 0 is not between 1 and 10000"),
            ("lanes: {now_share_percent: 95}", "f.yaml: lanes.now_share_percent: 95 is not between 0 and 90"),
            ("lanes: {now_large_job_bytes: 1000}", "f.yaml: lanes.now_large_job_bytes: 1000 is not between 65536 and 1073741824"),
            ("chunk_size: 100\nlanes: {now_max_devices: 200}", "f.yaml: lanes.now_max_devices: 200 is not between 1 and chunk_size (100)"),
            ("retry_delays_ms: []", "f.yaml: retry_delays_ms: needs at least one positive number of milliseconds"),
            ("retry_delays_ms: [100, 0]", "f.yaml: retry_delays_ms: needs at least one positive number of milliseconds"),
            ("amqp: {prefetch: 0}", "f.yaml: amqp.prefetch: 0 is not between 1 and 10000"),
        ] {
            do {
                _ = try PushWorkerConfiguration.parse(yaml + "\napps: []\n", file: "f.yaml")
                Issue.record("accepted \(yaml)")
            } catch {
                #expect("\(error)".hasPrefix(expected), "\(error)")
            }
        }
        #expect(try PushWorkerConfiguration.parse("chunk_size: 100\nlanes: {now_max_devices: 100}\napps: []\n", file: "f.yaml").worker.nowMaxDevices == 100)
    }

    @Test("max_in_flight bounds the devices in flight: 256 unless set, and a value out of range names the key")
    func maxInFlight() throws {
        // Any readable file stands in for the certificate: it is only opened when connecting.
        let certificate = try temporaryFile("not read")
        let app = #"{topic: t, environment: sandbox, url: "https://127.0.0.1:1", certificate: {file: \#(certificate), format: pem}}"#
        let file = try temporaryFile("""
            apps:
              - {name: a, \(app.dropFirst())
              - {name: b, max_in_flight: 50, \(app.dropFirst())
            """)
        let configuration = try PushWorkerConfiguration.load(file: file)
        _ = try configuration.apps[0].clientConfiguration(file: file, index: 0, environment: [:])
        #expect(configuration.apps[0].effectiveMaxInFlight == 256)
        _ = try configuration.apps[1].clientConfiguration(file: file, index: 1, environment: [:])
        #expect(configuration.apps[1].effectiveMaxInFlight == 50)
        // Refused where the app is read, as the file is loaded.
        let refused = try temporaryFile("""
            apps:
              - {name: a, \(app.dropFirst())
              - {name: b, max_in_flight: 50, \(app.dropFirst())
              - {name: c, max_in_flight: 0, \(app.dropFirst())
            """)
        do {
            _ = try PushWorkerConfiguration.load(file: refused)
            Issue.record("accepted max_in_flight 0")
        } catch {
            #expect("\(error)" == "\(refused): apps[2].max_in_flight: 0 is not between 1 and 100000")
        }
    }

    @Test(
        "a misspelt key anywhere is refused, naming the file, its path and the nearest known key",
        arguments: [
            ("amqp: {url: \"amqp://127.0.0.1/\", prefech: 3}\napps: []", "amqp.prefech: unknown key; did you mean prefetch?"),
            ("chunk_sise: 10\napps: []", "chunk_sise: unknown key; did you mean chunk_size?"),
            ("amqp: {url: \"amqp://a/\", hearbeat_seconds: 5}\napps: []", "amqp.hearbeat_seconds: unknown key; did you mean heartbeat_seconds?"),
            ("queues: {dead_leters: d}\napps: []", "queues.dead_leters: unknown key; did you mean dead_letters?"),
            ("registry: {sqlit: r.db}\napps: []", "registry.sqlit: unknown key; did you mean sqlite?"),
            ("apps:\n  - {name: a, topic: t, environment: sandbox, conections: 4}", "apps[0].conections: unknown key; did you mean connections?"),
            ("apps:\n  - {name: a, topic: t, environment: sandbox, token: {key_file: k, key_id: K, team_id: T, keyid: x}}", "apps[0].token.keyid: unknown key; did you mean key_id?"),
            ("apps:\n  - {name: a, topic: t, environment: sandbox, certificate: {file: f, pasword_env: P}}", "apps[0].certificate.pasword_env: unknown key; did you mean password_env?"),
            ("bananas: 3\napps: []", "bananas: unknown key; known here: amqp, apps, chunk_size"),
        ])
    func unknownKey(yaml: String, expected: String) throws {
        do {
            _ = try PushWorkerConfiguration.parse(yaml, file: "pushworker.yaml")
            Issue.record("accepted: \(yaml)")
        } catch {
            #expect("\(error)".hasPrefix("pushworker.yaml: " + expected), "\(error)")
        }
    }

    @Test("metrics_address: loopback port 9090 unless set, null turns the endpoint off, [::1]:PORT is IPv6; PUSHWORKER_METRICS_ADDRESS wins and is named in its errors")
    func metricsAddress() throws {
        func endpoint(_ yaml: String, _ environment: [String: String] = [:]) throws -> (String, Int, String)? {
            try PushWorkerConfiguration.parse(yaml + "\napps: []", file: "f").worker.metricsEndpoint(file: "f", environment: environment)
        }
        #expect(try endpoint("")! == ("127.0.0.1", 9090, "metrics_address"))
        #expect(try endpoint("metrics_address: null") == nil)
        #expect(try endpoint("metrics_address: \"0.0.0.0:9100\"")! == ("0.0.0.0", 9100, "metrics_address"))
        #expect(try endpoint("metrics_address: \"[::1]:9100\"")! == ("::1", 9100, "metrics_address"))
        let set = ["PUSHWORKER_METRICS_ADDRESS": "127.0.0.1:9191"]
        #expect(try endpoint("metrics_address: \"0.0.0.0:9100\"", set)! == ("127.0.0.1", 9191, "PUSHWORKER_METRICS_ADDRESS"))
        #expect(try endpoint("metrics_address: null", set)! == ("127.0.0.1", 9191, "PUSHWORKER_METRICS_ADDRESS"))
        #expect(try endpoint("", ["PUSHWORKER_METRICS_ADDRESS": "null"]) == nil)
        do {
            _ = try endpoint("", ["PUSHWORKER_METRICS_ADDRESS": "localhost"])
            Issue.record("a malformed PUSHWORKER_METRICS_ADDRESS accepted")
        } catch {
            #expect("\(error)".hasPrefix("f: PUSHWORKER_METRICS_ADDRESS: 'localhost' is not HOST:PORT"), "\(error)")
        }
        // `config check` shows the address in force and where it came from.
        let shown = try EffectiveConfiguration.check(PushWorkerConfiguration.parse("apps: []", file: "f"), file: "f", environment: set)
        #expect(shown.contains("metrics_address: 127.0.0.1:9191  (from PUSHWORKER_METRICS_ADDRESS)"), "\(shown)")
    }

    @Test("amqp.urls lists a cluster's nodes; PUSHWORKER_AMQP_URL may too; url and urls together, or a node twice, are refused naming the key; queue types are quorum unless set")
    func brokerNodes() throws {
        let listed = try PushWorkerConfiguration.parse("amqp: {urls: [\"amqp://h1/\", \"amqp://h2/\"], shuffle: false}\napps: []", file: "f").worker
        #expect(try listed.amqpConfiguration(file: "f", environment: [:]).addresses.map(\.host) == ["h1", "h2"])
        // `config check` shows them as listed, passwords masked, although each process shuffles them.
        let many = (1...8).map { "\"amqp://u:pw@h\($0)/\"" }.joined(separator: ", ")
        let shown = try EffectiveConfiguration.check(PushWorkerConfiguration.parse("amqp: {urls: [\(many)]}\napps: []", file: "f"), file: "f", environment: [:])
        #expect(shown.contains((1...8).map { "  - amqp://u:***@h\($0):5672/" }.joined(separator: "\n")), "\(shown)")
        #expect(!shown.contains("pw"))
        let fromEnvironment = try listed.amqpConfiguration(file: "f", environment: ["PUSHWORKER_AMQP_URL": "amqp://e1/,amqp://e2/,amqp://e3/"])
        #expect(fromEnvironment.addresses.map(\.host) == ["e1", "e2", "e3"])
        do {
            _ = try PushWorkerConfiguration.parse("amqp: {url: \"amqp://h1/\", urls: [\"amqp://h2/\"]}\napps: []", file: "f")
            Issue.record("url and urls accepted together")
        } catch {
            #expect("\(error)".contains("amqp.urls") && "\(error)".contains("not both"), "\(error)")
        }
        do {
            _ = try listed.amqpConfiguration(file: "f", environment: ["PUSHWORKER_AMQP_URL": "amqp://e1/,amqp://u:pw@e1:5672/"])
            Issue.record("a node named twice accepted")
        } catch {
            #expect("\(error)".contains("PUSHWORKER_AMQP_URL") && "\(error)".contains("names a node twice"), "\(error)")
            #expect(!"\(error)".contains(":pw@"))
        }
        let defaults = try PushWorkerConfiguration.parse("apps: []", file: "f").worker.topology
        let results = try #require(defaults.queues.first { $0.name == "push.results" })
        #expect(results.arguments["x-queue-type"] == "quorum")
        let retry = try #require(defaults.queues.first { $0.name == "push.jobs.retry.5000ms" })
        #expect(retry.arguments["x-queue-type"] == "quorum" && retry.arguments["x-dead-letter-strategy"] == "at-least-once" && retry.arguments["x-overflow"] == "reject-publish")
        let classic = try PushWorkerConfiguration.parse("queues: {results_type: classic, retry_type: classic}\napps: []", file: "f").worker.topology
        #expect(classic.queues.filter { $0.name == "push.results" || $0.name.contains(".retry.") }.allSatisfy { $0.arguments["x-queue-type"] == nil && $0.arguments["x-overflow"] == nil })
        do {
            _ = try PushWorkerConfiguration.parse("queues: {results_type: mirrored}\napps: []", file: "f")
            Issue.record("an unknown queue type accepted")
        } catch {
            #expect("\(error)".contains("queues.results_type") && "\(error)".contains("quorum or classic"), "\(error)")
        }
    }
}
