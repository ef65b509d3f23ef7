// Scanning: find a device that advertises the Battery Service, with BlueZ's filter applied and a
// timeout; the scan stops (StopDiscovery) as soon as the stream is done with.
//
// swift run Scan [adapter]      on real BlueZ (default: the first adapter)
// swift run Scan --simulated    on a simulated radio with one battery-powered device in range
import Able
import AbleSimulator

let argument = CommandLine.arguments.dropFirst().first
let adapter: Adapter
if argument == "--simulated" {
    let radio = SimulatedRadio()
    radio.addPeripheral(
        address: "00:5A:00:00:00:01", advertisement: Advertisement(localName: "Sensor", serviceUUIDs: [.batteryService])
    ) {
        Service(.batteryService) { Characteristic(.batteryLevel, properties: [.read, .notify], value: [87]) }
    }
    radio.addPeripheral(address: "00:5A:00:00:00:02", advertisement: Advertisement(localName: "Lamp"))
    adapter = radio.makeAdapter()
} else {
    adapter = if let argument { try await Adapter.named(argument) } else { try await Adapter.default() }
}

guard await adapter.state.isPowered else { fatalError("\(adapter.name) is powered off") }
let scan = try await adapter.scan(ScanFilter(serviceUUIDs: [.batteryService], minimumRSSI: -90))
let device = try await scan.first(timeout: .seconds(10))
print(
    "found \(device.address) \(device.name ?? "(no name)") at \(device.rssi.map { "\($0) dBm" } ?? "unknown strength")")
print("advertised services: \(device.advertisement.serviceUUIDs)")
