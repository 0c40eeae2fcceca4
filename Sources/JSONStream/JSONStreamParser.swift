import CYAJL

/// What a `JSONStreamParser` reports to. Return false to stop the parse, which then throws.
public protocol JSONEventHandler: AnyObject {
    func handle(_ event: JSONEvent) -> Bool
}

/// Parses a JSON document handed over in pieces of any size (message frames as they arrive)
/// and reports each event at once, so a document is never held whole. Over YAJL, which checks
/// the syntax and the UTF-8 of strings.
///
/// Not thread-safe: one parse, fed from one thread at a time.
public final class JSONStreamParser {
    private let handler: JSONEventHandler
    private var handle: yajl_handle!
    /// Bytes fed before the current piece, for error offsets across pieces.
    public private(set) var offset = 0
    private var stopped = false

    public init(handler: JSONEventHandler) {
        self.handler = handler
        // `self` is passed unretained: YAJL calls back only inside `parse`/`finish`, methods of
        // this object, and the handle is freed with it.
        handle = yajl_alloc(Self.callbackTable, nil, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        yajl_free(handle)
    }

    /// Feeds the next piece of the document.
    public func parse(_ bytes: RawSpan) throws(JSONStreamError) {
        let status = bytes.withUnsafeBytes { buffer in
            yajl_parse(handle, buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), buffer.count)
        }
        try check(status, fed: bytes.byteCount)
        offset += bytes.byteCount
    }

    public func parse(_ bytes: [UInt8]) throws(JSONStreamError) {
        try parse(bytes.span.bytes)
    }

    /// Ends the document: throws when it is incomplete.
    public func finish() throws(JSONStreamError) {
        try check(yajl_complete_parse(handle), fed: 0)
    }

    private func check(_ status: yajl_status, fed: Int) throws(JSONStreamError) {
        guard status != yajl_status_ok else { return }
        // YAJL counts the offending byte as consumed; the offset names that byte (from 0).
        let at = offset + (fed > 0 ? max(0, yajl_get_bytes_consumed(handle) - 1) : 0)
        if stopped || status == yajl_status_client_canceled {
            throw JSONStreamError("stopped by the reader", offset: at)
        }
        let text = yajl_get_error(handle, 0, nil, 0)
        defer { yajl_free_error(handle, text) }
        let message = text.map { String(cString: $0) } ?? "invalid JSON"
        throw JSONStreamError(message.trimmingCharacters(in: ["\n", " "]), offset: at)
    }

    fileprivate func deliver(_ event: JSONEvent) -> Int32 {
        if handler.handle(event) { return 1 }
        stopped = true
        return 0
    }

    private static func parser(_ context: UnsafeMutableRawPointer?) -> JSONStreamParser {
        Unmanaged<JSONStreamParser>.fromOpaque(context!).takeUnretainedValue()
    }

    private static func text(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> String {
        guard let bytes else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }

    /// YAJL keeps the pointer it is given, not a copy: one table for the life of the process,
    /// never written after it is made.
    nonisolated(unsafe) private static let callbackTable: UnsafeMutablePointer<yajl_callbacks> = {
        let table = UnsafeMutablePointer<yajl_callbacks>.allocate(capacity: 1)
        table.initialize(to: callbacks)
        return table
    }()

    private static let callbacks = yajl_callbacks(
        yajl_null: { parser($0).deliver(.null) },
        yajl_boolean: { parser($0).deliver(.bool($1 != 0)) },
        yajl_integer: nil,
        yajl_double: nil,
        yajl_number: { context, number, count in
            parser(context).deliver(.number(text(UnsafeRawPointer(number)?.assumingMemoryBound(to: UInt8.self), count)))
        },
        yajl_string: { parser($0).deliver(.string(text($1, $2))) },
        yajl_start_map: { parser($0).deliver(.startObject) },
        yajl_map_key: { parser($0).deliver(.key(text($1, $2))) },
        yajl_end_map: { parser($0).deliver(.endObject) },
        yajl_start_array: { parser($0).deliver(.startArray) },
        yajl_end_array: { parser($0).deliver(.endArray) })
}

extension String {
    fileprivate func trimmingCharacters(in set: Set<Character>) -> String {
        var text = Substring(self)
        while let first = text.first, set.contains(first) { text.removeFirst() }
        while let last = text.last, set.contains(last) { text.removeLast() }
        return String(text)
    }
}
