/// Device tokens travel as hex. Their length is not fixed by Apple (32 bytes today), so only the
/// shape is checked: even-length hex, 8 to 200 bytes.
public enum APNsDeviceToken {
    /// The lengths a token may have, in hex digits: the one place the rule is written (the job
    /// decoder, the registry and the token lists of very large jobs all check against it).
    public static let hexDigits = 16...400

    /// A token as apps commonly log it, made the lower-case hex APNs and the registry use: upper
    /// case, spaces and one enclosing `<` `>` (as `NSData`'s description printed it) are accepted;
    /// then `validate` checks the result. Anything else comes back unchanged, for `validate` to
    /// name it.
    public static func normalized(_ token: String) -> String {
        let utf8 = token.utf8
        // The common case, every token of a broadcast: already lower-case hex.
        let plain = utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isLowerHexDigit) } ?? utf8.allSatisfy(isLowerHexDigit)
        if plain { return token }
        var text = Substring(token).drop { $0 == " " }
        while text.last == " " { text = text.dropLast() }
        if text.first == "<" && text.last == ">" && text.count >= 2 { text = text.dropFirst().dropLast() }
        let digits = text.filter { $0 != " " }
        guard digits.utf8.allSatisfy(isHexDigit) else { return token }
        return digits.lowercased()
    }

    public static func validate(_ token: String, field: String = "token") throws(APNsValidationError) {
        let utf8 = token.utf8
        guard !utf8.isEmpty else { throw APNsValidationError(field: field, "device token is empty") }
        // Every send checks its token: over the contiguous bytes when the string has them (the
        // generic UTF8View walk showed up in the fan-out profile).
        let isHex = utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isHexDigit) } ?? utf8.allSatisfy(isHexDigit)
        guard isHex else {
            throw APNsValidationError(field: field, "device token '\(token.prefix(80))' is not hexadecimal")
        }
        guard utf8.count % 2 == 0, hexDigits.contains(utf8.count) else {
            throw APNsValidationError(
                field: field,
                "device token '\(token.prefix(80))' has \(utf8.count) hex digits; expected an even number between \(hexDigits.lowerBound) and \(hexDigits.upperBound)")
        }
    }

    private static func isLowerHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= 48 && byte <= 57) || (byte >= 97 && byte <= 102) || (byte >= 65 && byte <= 70)
    }
}
