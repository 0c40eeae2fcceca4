import AMQP
import APNs
import Logging

/// A short-lived process's place in the fleet's provider-token agreement (`pushworker channels`):
/// it joins for one key, so that what it sends APNs carries the token the running workers send
/// (read from the agreement, or signed and announced there when no worker holds one), and leaves
/// when done. APNs answers TooManyProviderTokenUpdates to a key whose token keeps changing; a
/// command that signed a token of its own would be one more change each time it ran.
public final class FleetTokenMembership: Sendable {
    private let agreement: ProviderTokenAgreement
    private let publisher: AMQPPublisher

    private init(agreement: ProviderTokenAgreement, publisher: AMQPPublisher) {
        self.agreement = agreement
        self.publisher = publisher
    }

    /// Joins for the app's key and returns once its source holds the fleet's token; nil when
    /// there is nothing to agree on (certificate auth, or `share_provider_tokens: false`).
    /// Throws, naming the broker, when the broker cannot be reached: the command then sends nothing.
    public static func join(_ plan: WorkerPlan, app: WorkerPlan.App, connectionName: String, logger: Logger) async throws -> FleetTokenMembership? {
        guard plan.settings.shareProviderTokens, case .token(let source) = app.client.authentication else { return nil }
        let amqp = plan.broker.undeclared(connectionName)
        do {
            let publisher = try await AMQPPublisher.connect(amqp, logger: logger)
            do {
                let agreement = try await ProviderTokenAgreement.start(
                    sources: [source], amqp: amqp, exchange: plan.settings.queues.tokensExchange, publisher: publisher, logger: logger)
                return FleetTokenMembership(agreement: agreement, publisher: publisher)
            } catch {
                await publisher.close()
                throw error
            }
        } catch {
            throw ConfigurationError(
                file: plan.file, key: "share_provider_tokens",
                "the fleet's provider token for key \(ProviderTokenAgreement.name(of: source)) is agreed on through the broker (\(amqp.redactedURLs)), which cannot be used: \(error). Start the broker, or set share_provider_tokens: false to sign a token here")
        }
    }

    public func leave() async {
        await agreement.stop()
        await publisher.close()
    }
}
