extension AdapterBackend {
    /// One legacy advertising instance, for a backend that says no more.
    package func advertisingCapabilities() async throws -> AdvertisingCapabilities {
        AdvertisingCapabilities(availableInstances: 1)
    }
}

extension Adapter {
    /// What the adapter can advertise now: free instances, data lengths, and the parameters the
    /// running BlueZ and the controller support.
    ///
    /// ``startAdvertising(_:)`` checks each advertisement against these before it asks BlueZ;
    /// ``Advertisement/validate(against:)`` does the same check for a caller that wants to know
    /// in advance.
    ///
    /// The corresponding BlueZ interface is `org.bluez.LEAdvertisingManager1` (its properties).
    /// - Returns: The capabilities, read from BlueZ's object tree (no D-Bus call).
    /// - Throws: ``BluetoothError`` with ``BluetoothError/Code/notAvailable`` when the adapter is
    ///   gone, ``BluetoothError/Code/notSupported`` when BlueZ offers no LE advertising on it.
    public func advertisingCapabilities() async throws -> AdvertisingCapabilities {
        try await backend.advertisingCapabilities()
    }
}
