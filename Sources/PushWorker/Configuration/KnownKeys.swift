/// Refuses configuration keys a section does not know. A misspelt key (`prefech`, `conections`)
/// would otherwise leave the default in force without a word, and an operator would run a worker
/// configured unlike the file they wrote.
enum KnownKeys {
    /// Throws for the first key of the mapping `decoder` reads that none of `known` spells, naming
    /// its path and the nearest known key.
    static func check(_ decoder: Decoder, names: [String]) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        for key in container.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) where !names.contains(key.stringValue) {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath + [key], debugDescription: unknownKeyMessage(key.stringValue, known: names)))
        }
    }

    static func check<Keys: CodingKey & CaseIterable>(_ decoder: Decoder, _ known: Keys.Type) throws {
        try check(decoder, names: names(known))
    }

    static func names<Keys: CodingKey & CaseIterable>(_ keys: Keys.Type) -> [String] {
        keys.allCases.map(\.stringValue)
    }

    static func unknownKeyMessage(_ key: String, known: [String]) -> String {
        let scored = known.map { (name: $0, distance: editDistance(key.lowercased(), $0)) }
        if let nearest = scored.min(by: { $0.distance < $1.distance }), nearest.distance <= max(2, nearest.name.count / 3) {
            return "unknown key; did you mean \(nearest.name)?"
        }
        return "unknown key; known here: \(known.sorted().joined(separator: ", "))"
    }

    /// Levenshtein distance: the number of letters to insert, delete or change.
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1]
            for (j, y) in b.enumerated() {
                current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1)))
            }
            previous = current
        }
        return previous[b.count]
    }

    private struct AnyKey: CodingKey {
        let stringValue: String
        let intValue: Int? = nil
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
