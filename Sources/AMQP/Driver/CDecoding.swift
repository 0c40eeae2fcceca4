import CRabbitMQ

/// Copies values out of librabbitmq's structures into Swift values. Everything returned owns its
/// memory, so the connection's buffers can be released right after.
enum CDecoding {
    static func bytes(_ b: amqp_bytes_t) -> [UInt8] {
        guard b.len > 0, let base = b.bytes else { return [] }
        return Array(UnsafeRawBufferPointer(start: base, count: b.len))
    }

    static func string(_ b: amqp_bytes_t) -> String {
        guard b.len > 0, let base = b.bytes else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: base, count: b.len), as: UTF8.self)
    }

    static func table(_ t: amqp_table_t) -> AMQPTable {
        var result = AMQPTable()
        guard t.num_entries > 0, let entries = t.entries else { return result }
        for index in 0..<Int(t.num_entries) {
            let entry = entries[index]
            result[string(entry.key)] = field(entry.value)
        }
        return result
    }

    static func field(_ f: amqp_field_value_t) -> AMQPFieldValue {
        switch Unicode.Scalar(f.kind) {
        case "t": return .bool(f.value.boolean != 0)
        case "b": return .int8(f.value.i8)
        case "B": return .uint8(f.value.u8)
        case "s": return .int16(f.value.i16)
        case "u": return .uint16(f.value.u16)
        case "I": return .int32(f.value.i32)
        case "i": return .uint32(f.value.u32)
        case "l": return .int64(f.value.i64)
        case "L": return .uint64(f.value.u64)
        case "f": return .float(f.value.f32)
        case "d": return .double(f.value.f64)
        case "D": return .decimal(decimals: f.value.decimal.decimals, value: f.value.decimal.value)
        case "S":
            let raw = bytes(f.value.bytes)
            if let text = String(validating: raw, as: UTF8.self) { return .string(text) }
            return .bytes(raw)
        case "x": return .bytes(bytes(f.value.bytes))
        case "T": return .timestamp(f.value.u64)
        case "F": return .table(table(f.value.table))
        case "A":
            let array = f.value.array
            guard array.num_entries > 0, let entries = array.entries else { return .array([]) }
            return .array((0..<Int(array.num_entries)).map { field(entries[$0]) })
        default: return .void
        }
    }

    static func properties(_ p: amqp_basic_properties_t) -> AMQPProperties {
        let flags = p._flags
        func has(_ flag: amqp_flags_t) -> Bool { flags & flag != 0 }
        func text(_ flag: amqp_flags_t, _ value: amqp_bytes_t) -> String? { has(flag) ? string(value) : nil }
        return AMQPProperties(
            contentType: text(PW_FLAG_CONTENT_TYPE, p.content_type),
            contentEncoding: text(PW_FLAG_CONTENT_ENCODING, p.content_encoding),
            headers: has(PW_FLAG_HEADERS) ? table(p.headers) : nil,
            persistent: has(PW_FLAG_DELIVERY_MODE) ? p.delivery_mode == 2 : nil,
            priority: has(PW_FLAG_PRIORITY) ? p.priority : nil,
            correlationID: text(PW_FLAG_CORRELATION_ID, p.correlation_id),
            replyTo: text(PW_FLAG_REPLY_TO, p.reply_to),
            expiration: text(PW_FLAG_EXPIRATION, p.expiration),
            messageID: text(PW_FLAG_MESSAGE_ID, p.message_id),
            timestamp: has(PW_FLAG_TIMESTAMP) ? p.timestamp : nil,
            type: text(PW_FLAG_TYPE, p.type),
            userID: text(PW_FLAG_USER_ID, p.user_id),
            appID: text(PW_FLAG_APP_ID, p.app_id)
        )
    }
}
