/// Device tokens travel as hex. Their length is not fixed by Apple (32 bytes today), so only the
/// shape is checked: even-length hex, 8 to 200 bytes.
public enum APNsDeviceToken {
    public static func validate(_ token: String, field: String = "token") throws(APNsValidationError) {
        let utf8 = token.utf8
        guard !utf8.isEmpty else { throw APNsValidationError(field: field, "device token is empty") }
        guard utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) || ($0 >= 65 && $0 <= 70) }) else {
            throw APNsValidationError(field: field, "device token '\(token.prefix(80))' is not hexadecimal")
        }
        guard utf8.count % 2 == 0, (16...400).contains(utf8.count) else {
            throw APNsValidationError(field: field, "device token '\(token.prefix(80))' has \(utf8.count) hex digits; expected an even number between 16 and 400")
        }
    }
}
