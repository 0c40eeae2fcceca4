import COpenSSL

/// OpenSSL's process-wide setup, for programs that use it from many threads.
public enum OpenSSLProcess {
    /// Keeps OpenSSL from freeing its global state in an `atexit` handler. A program leaves from
    /// whichever thread ends its async main, while other threads (connections' engines, the
    /// runtime's pool) may still hold OpenSSL objects; the cleanup then frees what they use, and
    /// a worker that drained and said "worker stopped" crashed in libcrypto on its way out. The
    /// system takes the memory back at exit anyway. Call it before anything else uses OpenSSL.
    public static func skipCleanupAtExit() {
        _ = pw_openssl_init_without_atexit()
    }
}
