import APNs
import Foundation

/// One app's parts, built once per process: its sender (one connection pool), its admission
/// (shared by both lanes, so the now lane's reserve is of the app's one `max_in_flight`) and its
/// channel manager, both talking to APNs with the process's one provider-token source for the
/// app's key.
public struct AppParts: Sendable {
    public let plan: WorkerPlan.App
    public let sender: any OwnedNotificationSender
    public let admission: DeviceAdmission
    public let channels: any ChannelManaging
    /// Its FCM side (`apps[].fcm`): one client, one access-token source; nil for APNs only.
    public let fcm: (any FCMSending)?

    /// What a lane's pipeline knows of the app.
    var pipelineApp: JobPipeline.App {
        JobPipeline.App(
            name: plan.name, topic: plan.topic, sender: sender, admission: admission,
            defaultExpiration: plan.configuration.defaultExpiration, defaultResults: plan.configuration.defaultResults,
            timeZone: plan.configuration.timeZone.flatMap(TimeZone.init(identifier:)) ?? .gmt, quietHours: plan.configuration.quietHours ?? .defer,
            caps: plan.configuration.caps, fcm: fcm)
    }
}
