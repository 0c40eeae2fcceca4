import CommandLineSupport
import PushWorker

extension WorkerPlan {
    /// The app a command's `--app` names (or the only one), or a failure that lists the
    /// configured ones: what `send` and `channels` say when the choice is wrong or missing.
    func chosenApp(_ name: String?) throws -> App {
        guard let chosen = app(named: name) else {
            let names = apps.map(\.name).joined(separator: ", ")
            throw CommandFailure(name.map { "\(file): no app named '\($0)' (configured: \(names))" }
                ?? "\(file) configures \(apps.count) apps (\(names)); choose one with --app")
        }
        return chosen
    }
}
