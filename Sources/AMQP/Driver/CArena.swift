import CRabbitMQ
import Foundation

/// Owns the C memory built for one outgoing librabbitmq call (a publish's properties, a queue's
/// arguments) and frees all of it when the call returns. librabbitmq serialises its arguments
/// before returning, so nothing it was given outlives the arena.
final class CArena {
    private var allocations: [UnsafeMutableRawPointer] = []

    /// Runs `body` with a fresh arena and frees everything allocated in it, on every path.
    static func with<R>(_ body: (CArena) throws -> R) rethrows -> R {
        let arena = CArena()
        defer { arena.freeAll() }
        return try body(arena)
    }

    private func allocate(byteCount: Int) -> UnsafeMutableRawPointer {
        guard let pointer = malloc(max(byteCount, 1)) else { fatalError("out of memory allocating \(byteCount) bytes") }
        allocations.append(pointer)
        return pointer
    }

    private func freeAll() {
        for pointer in allocations { free(pointer) }
        allocations.removeAll()
    }

    func bytes(_ string: String) -> amqp_bytes_t {
        var string = string
        return string.withUTF8 { bytes(UnsafeRawBufferPointer($0)) }
    }

    func bytes(_ array: [UInt8]) -> amqp_bytes_t {
        array.withUnsafeBytes { bytes($0) }
    }

    /// A NUL-terminated copy, for the librabbitmq calls that take `const char *`.
    func cString(_ string: String) -> UnsafePointer<CChar> {
        let utf8 = Array(string.utf8CString)
        let pointer = allocate(byteCount: utf8.count)
        utf8.withUnsafeBytes { pointer.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        return UnsafePointer(pointer.assumingMemoryBound(to: CChar.self))
    }

    private func bytes(_ buffer: UnsafeRawBufferPointer) -> amqp_bytes_t {
        let pointer = allocate(byteCount: buffer.count)
        if let base = buffer.baseAddress, buffer.count > 0 {
            pointer.copyMemory(from: base, byteCount: buffer.count)
        }
        return amqp_bytes_t(len: buffer.count, bytes: pointer)
    }

    func table(_ table: AMQPTable) -> amqp_table_t {
        guard !table.isEmpty else { return amqp_table_t(num_entries: 0, entries: nil) }
        let entries = allocate(byteCount: MemoryLayout<amqp_table_entry_t>.stride * table.count)
            .bindMemory(to: amqp_table_entry_t.self, capacity: table.count)
        // Sorted so the same table always serialises to the same bytes.
        for (index, key) in table.keys.sorted().enumerated() {
            (entries + index).initialize(to: amqp_table_entry_t(key: bytes(key), value: field(table[key]!)))
        }
        return amqp_table_t(num_entries: Int32(table.count), entries: entries)
    }

    func field(_ value: AMQPFieldValue) -> amqp_field_value_t {
        var field = amqp_field_value_t()
        func kind(_ character: Unicode.Scalar) { field.kind = UInt8(ascii: character) }
        switch value {
        case .bool(let v): kind("t"); field.value.boolean = v ? 1 : 0
        case .int8(let v): kind("b"); field.value.i8 = v
        case .uint8(let v): kind("B"); field.value.u8 = v
        case .int16(let v): kind("s"); field.value.i16 = v
        case .uint16(let v): kind("u"); field.value.u16 = v
        case .int32(let v): kind("I"); field.value.i32 = v
        case .uint32(let v): kind("i"); field.value.u32 = v
        case .int64(let v): kind("l"); field.value.i64 = v
        case .uint64(let v): kind("L"); field.value.u64 = v
        case .float(let v): kind("f"); field.value.f32 = v
        case .double(let v): kind("d"); field.value.f64 = v
        case .decimal(let decimals, let v): kind("D"); field.value.decimal = amqp_decimal_t(decimals: decimals, value: v)
        case .string(let v): kind("S"); field.value.bytes = bytes(v)
        case .bytes(let v): kind("x"); field.value.bytes = bytes(v)
        case .timestamp(let v): kind("T"); field.value.u64 = v
        case .table(let v): kind("F"); field.value.table = table(v)
        case .array(let values):
            kind("A")
            if values.isEmpty {
                field.value.array = amqp_array_t(num_entries: 0, entries: nil)
            } else {
                let entries = allocate(byteCount: MemoryLayout<amqp_field_value_t>.stride * values.count)
                    .bindMemory(to: amqp_field_value_t.self, capacity: values.count)
                for (index, element) in values.enumerated() {
                    (entries + index).initialize(to: self.field(element))
                }
                field.value.array = amqp_array_t(num_entries: Int32(values.count), entries: entries)
            }
        case .void: kind("V")
        }
        return field
    }

    func properties(_ properties: AMQPProperties) -> amqp_basic_properties_t {
        var p = amqp_basic_properties_t()
        var flags: amqp_flags_t = 0
        func set(_ value: String?, _ flag: amqp_flags_t, _ target: inout amqp_bytes_t) {
            guard let value else { return }
            target = bytes(value)
            flags |= flag
        }
        set(properties.contentType, PW_FLAG_CONTENT_TYPE, &p.content_type)
        set(properties.contentEncoding, PW_FLAG_CONTENT_ENCODING, &p.content_encoding)
        set(properties.correlationID, PW_FLAG_CORRELATION_ID, &p.correlation_id)
        set(properties.replyTo, PW_FLAG_REPLY_TO, &p.reply_to)
        set(properties.expiration, PW_FLAG_EXPIRATION, &p.expiration)
        set(properties.messageID, PW_FLAG_MESSAGE_ID, &p.message_id)
        set(properties.type, PW_FLAG_TYPE, &p.type)
        set(properties.userID, PW_FLAG_USER_ID, &p.user_id)
        set(properties.appID, PW_FLAG_APP_ID, &p.app_id)
        if let headers = properties.headers {
            p.headers = table(headers)
            flags |= PW_FLAG_HEADERS
        }
        if let persistent = properties.persistent {
            p.delivery_mode = persistent ? 2 : 1
            flags |= PW_FLAG_DELIVERY_MODE
        }
        if let priority = properties.priority {
            p.priority = priority
            flags |= PW_FLAG_PRIORITY
        }
        if let timestamp = properties.timestamp {
            p.timestamp = timestamp
            flags |= PW_FLAG_TIMESTAMP
        }
        p._flags = flags
        return p
    }
}
