import Foundation

/// The worker's one way to read and to write a JSON document held whole, so every reader
/// reports errors the same way and every writer makes the same bytes for the same tree.
///
/// - Reading: the tree of Foundation's `JSONSerialization`, the `[String: Any]` that `JobDecoder`
///   and the registry's field readers check field by field, so an error names the bad field and
///   not a coding path. `JSONTreeReader` makes it for the plain documents most jobs are, faster;
///   whatever it declines, Foundation reads, so the errors are Foundation's. A body too large to hold is
///   the one exception: `StreamedJobReader` reads it with YAJL (`JSONStream`) as it arrives, and
///   `JSONSyntaxError` uses the same parser to say where any document goes wrong.
/// - Writing: trees built from what producers sent (a payload the worker changed, a chunk job's
///   fields, registry replies) go out through `bytes(_:)`: keys sorted, so the same job makes
///   the same bytes in every worker and chunk, and slashes unescaped, as producers wrote them.
///   Sorting costs: Foundation compares the keys through ICU's collation (a log line of ten
///   keys took 74–80 µs, about 3 µs a comparison). The contract's typed documents (`JobSummary.json`, `PushResult.json`, chunk
///   device lists, `ResultBatch`) and the JSON log's lines are written by splicing bytes with
///   `JSONText`, because a tree or an encoder per device or per one-device job was a visible
///   share of the worker's CPU; the
///   schema tests hold them to the contract, and the summary to what `JSONEncoder` with the same
///   options makes of its `Encodable` form. A payload the worker leaves as it is is not written
///   at all: `JSONMemberText` takes its text from the body.
///
/// Outside this module, and on purpose not through it: the `Stores` module (below this one)
/// reads commands with `JSONSerialization` the same way, and keeps the preference columns' text
/// as it always wrote it (`.sortedKeys` only), because rows already stored compare by that text;
/// the command-line tools print what they read for a person.
public enum JSONDocument {
    /// The options every tree is written with.
    static let writingOptions: JSONSerialization.WritingOptions = [.sortedKeys, .withoutEscapingSlashes]

    /// The document as a tree, or where it is not JSON.
    public static func parse(_ bytes: some DataProtocol) throws(JSONSyntaxError) -> Any {
        if let tree = JSONTreeReader.tree(bytes) { return tree }
        return try JSONSyntaxError.check(Data(bytes))
    }

    /// The tree as bytes; nil only for a tree that is not JSON (a value no JSON type holds).
    public static func bytes(_ tree: Any) -> [UInt8]? {
        // The writer refuses what is not JSON itself (a throw, not a trap, in this Foundation):
        // no `isValidJSONObject` walk of the tree before it, which was 3 % of a one-device job.
        (try? JSONSerialization.data(withJSONObject: tree, options: writingOptions.union(.fragmentsAllowed))).map(Array.init)
    }
}
