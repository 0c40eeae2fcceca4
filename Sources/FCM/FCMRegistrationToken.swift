/// The form of an Android device's FCM registration token: base64url characters and a colon
/// (`<instance id>:<token>`), about 150 or more characters; a token from before 2018 starts
/// `APA91b` and has no colon. Checked where a token comes in (`register_device`, a job naming
/// it), so an APNs token sent as an Android one, or a truncated one, is refused by name.
public enum FCMRegistrationToken {
    public static let minimumLength = 100
    public static let maximumLength = 4096

    /// Nil when `token` has the form; else why not.
    public static func problem(_ token: String) -> String? {
        let bytes = token.utf8
        if bytes.count == 64, bytes.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) || (65...70).contains($0) }) {
            return "is 64 hex digits: an APNs device token, not an FCM registration token"
        }
        guard (minimumLength...maximumLength).contains(bytes.count) else {
            return "is \(bytes.count) characters; an FCM registration token has \(minimumLength) to \(maximumLength)"
        }
        guard bytes.allSatisfy({ byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":")
        }) else {
            return "has characters an FCM registration token has not (base64url and a colon)"
        }
        guard bytes.contains(UInt8(ascii: ":")) || token.hasPrefix("APA91b") else {
            return "has no colon (an FCM registration token is <instance id>:<token>)"
        }
        return nil
    }
}
