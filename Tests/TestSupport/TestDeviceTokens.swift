import Foundation

/// Device tokens for the tests: 64 hex digits (32 bytes, what APNs takes), `series + index`
/// zero-padded. Each suite keeps a series of its own (0xB000, 0xE000, …), so tokens from two
/// suites never meet in one mock's records.
public enum TestDeviceTokens {
    /// The device token `index` of `series`: `String(format: "%064x", series + index)`.
    public static func hex(_ index: Int, series: Int) -> String { String(format: "%064x", series + index) }
}
