/// The text of one member of a JSON object as the producer wrote it, without the whitespace
/// between tokens: for a value the worker passes on unchanged (a job's `payload`), so it is not
/// written again from the parsed tree. Writing a payload back out through `JSONSerialization`
/// was the largest share of decoding a one-device job.
///
/// Reads a document already parsed whole (`JSONDocument.parse` accepted it), so it checks no
/// syntax; it gives nil whenever it cannot be sure of the answer (the key absent, present twice,
/// or written with escapes, at the top or inside the value), and the caller then writes the value
/// from the tree.
enum JSONMemberText {
    /// The value of the top-level member `key` of `document`, a JSON object.
    static func value(of key: String, in document: [UInt8]) -> [UInt8]? {
        let wanted = Array(key.utf8)
        var found: Range<Int>?
        var index = skipSpace(document, 0)
        guard index < document.count, document[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        while true {
            index = skipSpace(document, index)
            guard index < document.count else { return nil }
            if document[index] == UInt8(ascii: "}") { break }
            if document[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard document[index] == UInt8(ascii: "\"") else { return nil }
            let keyStart = index + 1
            let keyEnd = endOfString(document, keyStart)
            guard keyEnd < document.count else { return nil }
            let rawKey = document[keyStart..<keyEnd]
            // An escaped key might spell `key` another way: let the tree answer.
            if rawKey.contains(UInt8(ascii: "\\")) { return nil }
            index = skipSpace(document, keyEnd + 1)
            guard index < document.count, document[index] == UInt8(ascii: ":") else { return nil }
            let valueStart = skipSpace(document, index + 1)
            let valueEnd = endOfValue(document, valueStart)
            guard valueEnd <= document.count, valueEnd > valueStart else { return nil }
            if rawKey.elementsEqual(wanted) {
                // Twice: which one the parser kept is its business, not this reader's.
                guard found == nil else { return nil }
                found = valueStart..<valueEnd
            }
            index = valueEnd
        }
        return found.flatMap { minified(document[$0]) }
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    private static func skipSpace(_ document: [UInt8], _ start: Int) -> Int {
        var index = start
        while index < document.count, isSpace(document[index]) { index += 1 }
        return index
    }

    /// The index of the quote that closes the string whose text starts at `start`.
    private static func endOfString<Text: RandomAccessCollection<UInt8>>(_ document: Text, _ start: Int) -> Int where Text.Index == Int {
        var index = start
        while index < document.endIndex {
            switch document[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""): return index
            default: index += 1
            }
        }
        return document.endIndex
    }

    /// The index just past the value that starts at `start`.
    private static func endOfValue(_ document: [UInt8], _ start: Int) -> Int {
        var index = start
        var depth = 0
        while index < document.count {
            let byte = document[index]
            switch byte {
            case UInt8(ascii: "\""):
                index = endOfString(document, index + 1) + 1
                if depth == 0 { return index }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return index }  // the end of a scalar at the object's end
                depth -= 1
                if depth == 0 { return index + 1 }
            case UInt8(ascii: ","):
                if depth == 0 { return index }
            default:
                if depth == 0 && isSpace(byte) { return index }
            }
            index += 1
        }
        return index
    }

    /// The value's text without whitespace outside its strings; nil when one of its objects has a
    /// key twice or a key written with escapes: the parser kept one of the two (or read the
    /// escape), and the text would say otherwise than the tree the worker checked.
    private static func minified(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        // Over the bytes themselves: the slice's generic paths (a hashed set of key slices, an
        // append through `withContiguousStorageIfAvailable`) were a tenth of decoding a one-device job.
        text.withUnsafeBufferPointer { text in
            var out: [UInt8] = []
            out.reserveCapacity(text.count)
            // Per open object, its keys so far; an array is nil.
            var containers: [ObjectKeys?] = []
            var expectingKey = false
            var index = 0
            while index < text.count {
                let byte = text[index]
                switch byte {
                case UInt8(ascii: "\""):
                    let end = endOfString(text, index + 1)
                    guard end < text.count else { return nil }
                    if expectingKey {
                        let key = (index + 1)..<end
                        if text[key].contains(UInt8(ascii: "\\")) { return nil }
                        guard containers[containers.count - 1]?.insert(key, of: text) == true else { return nil }
                        expectingKey = false
                    }
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: text[index...end]))
                    index = end + 1
                    continue
                case UInt8(ascii: "{"):
                    containers.append(ObjectKeys())
                    expectingKey = true
                case UInt8(ascii: "["):
                    containers.append(nil)
                    expectingKey = false
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    _ = containers.popLast()
                    expectingKey = false
                case UInt8(ascii: ","):
                    expectingKey = containers.last.map { $0 != nil } ?? false
                default:
                    if isSpace(byte) {
                        index += 1
                        continue
                    }
                }
                out.append(byte)
                index += 1
            }
            return out
        }
    }

    /// An object's keys so far: a payload's objects have a few, compared one by one where they
    /// are; past `few`, a set of copies, so that an object of thousands of keys (a body may hold
    /// one) is not compared key by key against all the others.
    private struct ObjectKeys {
        static let few = 16
        var places: [Range<Int>] = []
        var copies: Set<[UInt8]>?

        /// False when the object has the key already.
        mutating func insert(_ key: Range<Int>, of text: UnsafeBufferPointer<UInt8>) -> Bool {
            if copies != nil { return copies!.insert(Array(text[key])).inserted }
            if places.contains(where: { text[$0].elementsEqual(text[key]) }) { return false }
            places.append(key)
            if places.count > Self.few {
                copies = Set(places.map { Array(text[$0]) })
                places = []
            }
            return true
        }
    }
}
