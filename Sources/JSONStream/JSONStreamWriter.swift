import CYAJL

/// Writes JSON from events, escaping strings and checking the structure as it goes (YAJL's
/// generator). Used to rebuild a document without the parts taken out of it.
public final class JSONStreamWriter {
    private let generator: yajl_gen

    public init() {
        generator = yajl_gen_alloc(nil)
        // A `/` stays as it is, as Foundation's `.withoutEscapingSlashes` writes it.
        _ = pw_yajl_gen_set_option(generator, yajl_gen_escape_solidus, 0)
    }

    deinit {
        yajl_gen_free(generator)
    }

    /// Throws when the event does not fit where it comes (a value where a key belongs, nesting
    /// deeper than YAJL's 128 levels).
    public func write(_ event: JSONEvent) throws(JSONStreamError) {
        let status: yajl_gen_status
        switch event {
        case .null: status = yajl_gen_null(generator)
        case .bool(let value): status = yajl_gen_bool(generator, value ? 1 : 0)
        case .number(let text): status = text.withCString { yajl_gen_number(generator, $0, text.utf8.count) }
        case .string(let text), .key(let text):
            var text = text
            status = text.withUTF8 { yajl_gen_string(generator, $0.baseAddress, $0.count) }
        case .startObject: status = yajl_gen_map_open(generator)
        case .endObject: status = yajl_gen_map_close(generator)
        case .startArray: status = yajl_gen_array_open(generator)
        case .endArray: status = yajl_gen_array_close(generator)
        }
        guard status == yajl_gen_status_ok else {
            throw JSONStreamError(status == yajl_max_depth_exceeded ? "nested deeper than 128 levels" : "cannot write \(event) here", offset: byteCount)
        }
    }

    /// The document so far.
    public var bytes: [UInt8] {
        var buffer: UnsafePointer<UInt8>?
        var length = 0
        yajl_gen_get_buf(generator, &buffer, &length)
        guard let buffer else { return [] }
        return Array(UnsafeBufferPointer(start: buffer, count: length))
    }

    public var byteCount: Int {
        var buffer: UnsafePointer<UInt8>?
        var length = 0
        yajl_gen_get_buf(generator, &buffer, &length)
        return length
    }
}
