/// A value held once however many copies of its holder there are, copied on a write while shared.
///
/// For structs of many strings, arrays and references that pass through many hands (a job through
/// a pipeline's stages, a message's properties through a connection): each copy of the holder
/// retains one box instead of every field. Sendable as the standard library's own copy-on-write
/// types are: a write goes in place only while this copy is the box's only holder.
public struct CopyOnWrite<Value: Hashable & Sendable>: Hashable, Sendable {
    @usableFromInline
    final class Box: @unchecked Sendable {
        @usableFromInline var value: Value
        @inlinable init(_ value: Value) { self.value = value }
    }

    @usableFromInline var box: Box

    @inlinable
    public init(_ value: Value) {
        box = Box(value)
    }

    @inlinable
    public var value: Value {
        _read { yield box.value }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.value) }
            yield &box.value
        }
    }

    @inlinable
    public static func == (lhs: CopyOnWrite, rhs: CopyOnWrite) -> Bool {
        lhs.box === rhs.box || lhs.box.value == rhs.box.value
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        box.value.hash(into: &hasher)
    }
}
