extension EventLoop {
    /// The loop every socket of Able runs on: L2CAP channels and listeners, connections under
    /// way, and characteristics' acquired sockets. Their actors use it as their executor, so
    /// that their isolated code and their sockets' handlers share one thread, with no hop.
    ///
    /// It is not the D-Bus loop: a socket flooded with data must not hold up BlueZ's replies, nor
    /// D-Bus traffic the sockets.
    package static let sockets = EventLoop(threadName: "able.sockets")
}
