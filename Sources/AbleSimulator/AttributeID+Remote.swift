import AbleCore

extension AttributeID {
    /// The last component of a Client Characteristic Configuration's identity, after its
    /// characteristic's: the simulator serves no descriptor at that index.
    static let cccdComponent = UInt16.max

    /// The characteristic whose Client Characteristic Configuration `remote` names.
    init?(cccdOf remote: RemoteAttributeID) {
        guard remote.components.count == 3, remote.components[2] == Self.cccdComponent else { return nil }
        self.init(remote: RemoteAttributeID(Array(remote.components.prefix(2))))
    }

    /// The identity a central's view of a simulated attribute carries: its indices.
    var remote: RemoteAttributeID {
        RemoteAttributeID(([service, characteristic] + (descriptor.map { [$0] } ?? [])).map { UInt16($0) })
    }

    init?(remote: RemoteAttributeID) {
        let parts = remote.components.map(Int.init)
        guard parts.count == 2 || (parts.count == 3 && parts[2] != Int(Self.cccdComponent)) else { return nil }
        self.init(service: parts[0], characteristic: parts[1], descriptor: parts.count == 3 ? parts[2] : nil)
    }
}
