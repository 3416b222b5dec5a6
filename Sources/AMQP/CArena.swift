import CRabbitMQ
import Foundation

/// Owns the C memory behind the `amqp_bytes_t`/`amqp_table_t` arguments of one rabbitmq-c call.
///
/// rabbitmq-c borrows these pointers for the duration of the call only, so an arena that lives for
/// the call (and frees everything in `deinit`) keeps them valid without any bytes outliving it.
final class CArena {
    private var allocations: [UnsafeMutableRawPointer] = []

    deinit {
        for allocation in allocations { free(allocation) }
    }

    private func allocate(_ size: Int) -> UnsafeMutableRawPointer {
        let pointer = malloc(max(size, 1))!
        allocations.append(pointer)
        return pointer
    }

    func bytes(_ string: String) -> amqp_bytes_t {
        bytes(Array(string.utf8))
    }

    func bytes(_ array: [UInt8]) -> amqp_bytes_t {
        let pointer = allocate(array.count)
        array.withUnsafeBytes { pointer.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(pointer), byteCount: $0.count) }
        return amqp_bytes_t(len: array.count, bytes: pointer)
    }

    func table(_ table: AMQPTable) -> amqp_table_t {
        guard !table.isEmpty else { return amqp_empty_table }
        let entries = allocate(MemoryLayout<amqp_table_entry_t>.stride * table.count)
            .bindMemory(to: amqp_table_entry_t.self, capacity: table.count)
        // Sorted so the encoding is deterministic.
        for (index, (key, value)) in table.sorted(by: { $0.key < $1.key }).enumerated() {
            entries[index] = amqp_table_entry_t(key: bytes(key), value: field(value))
        }
        return amqp_table_t(num_entries: Int32(table.count), entries: entries)
    }

    func field(_ value: AMQPFieldValue) -> amqp_field_value_t {
        var field = amqp_field_value_t()
        switch value {
        case .bool(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_BOOLEAN.rawValue)
            field.value.boolean = v ? 1 : 0
        case .int8(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_I8.rawValue)
            field.value.i8 = v
        case .int16(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_I16.rawValue)
            field.value.i16 = v
        case .int32(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_I32.rawValue)
            field.value.i32 = v
        case .int64(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_I64.rawValue)
            field.value.i64 = v
        case .uint8(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_U8.rawValue)
            field.value.u8 = v
        case .uint16(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_U16.rawValue)
            field.value.u16 = v
        case .uint32(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_U32.rawValue)
            field.value.u32 = v
        case .float(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_F32.rawValue)
            field.value.f32 = v
        case .double(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_F64.rawValue)
            field.value.f64 = v
        case .string(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_UTF8.rawValue)
            field.value.bytes = bytes(v)
        case .bytes(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_BYTES.rawValue)
            field.value.bytes = bytes(v)
        case .timestamp(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_TIMESTAMP.rawValue)
            field.value.u64 = v
        case .table(let v):
            field.kind = UInt8(AMQP_FIELD_KIND_TABLE.rawValue)
            field.value.table = table(v)
        case .array(let values):
            field.kind = UInt8(AMQP_FIELD_KIND_ARRAY.rawValue)
            let entries = allocate(MemoryLayout<amqp_field_value_t>.stride * max(values.count, 1))
                .bindMemory(to: amqp_field_value_t.self, capacity: max(values.count, 1))
            for (index, element) in values.enumerated() { entries[index] = self.field(element) }
            field.value.array = amqp_array_t(num_entries: Int32(values.count), entries: entries)
        case .void: field.kind = UInt8(AMQP_FIELD_KIND_VOID.rawValue)
        }
        return field
    }

    func properties(_ properties: AMQPProperties, extraHeaders: AMQPTable) -> amqp_basic_properties_t {
        var p = amqp_basic_properties_t()
        var flags: amqp_flags_t = 0
        if let v = properties.contentType {
            flags |= push_amqp_flag_content_type
            p.content_type = bytes(v)
        }
        if let v = properties.contentEncoding {
            flags |= push_amqp_flag_content_encoding
            p.content_encoding = bytes(v)
        }
        let headers = extraHeaders.isEmpty ? properties.headers : properties.headers.merging(extraHeaders) { $1 }
        if !headers.isEmpty {
            flags |= push_amqp_flag_headers
            p.headers = table(headers)
        }
        flags |= push_amqp_flag_delivery_mode
        p.delivery_mode = properties.persistent ? 2 : 1
        if let v = properties.priority {
            flags |= push_amqp_flag_priority
            p.priority = v
        }
        if let v = properties.correlationID {
            flags |= push_amqp_flag_correlation_id
            p.correlation_id = bytes(v)
        }
        if let v = properties.replyTo {
            flags |= push_amqp_flag_reply_to
            p.reply_to = bytes(v)
        }
        if let v = properties.expiration {
            flags |= push_amqp_flag_expiration
            p.expiration = bytes(v)
        }
        if let v = properties.messageID {
            flags |= push_amqp_flag_message_id
            p.message_id = bytes(v)
        }
        if let v = properties.timestamp {
            flags |= push_amqp_flag_timestamp
            p.timestamp = v
        }
        if let v = properties.type {
            flags |= push_amqp_flag_type
            p.type = bytes(v)
        }
        if let v = properties.appID {
            flags |= push_amqp_flag_app_id
            p.app_id = bytes(v)
        }
        p._flags = flags
        return p
    }
}
