/// One step of a JSON document, in document order. Strings and keys arrive unescaped; numbers
/// keep their text, so nothing is rounded on the way through.
public enum JSONEvent: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case key(String)
    case startObject
    case endObject
    case startArray
    case endArray
}
