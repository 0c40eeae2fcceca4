import ArgumentParser
import Stores

/// `bench e2e --platform apns|fcm`, so one command measures the worker on either service.
extension DevicePlatform: ExpressibleByArgument {}
