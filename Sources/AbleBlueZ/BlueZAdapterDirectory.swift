import AbleCore
import AbleDBus

/// BlueZ's adapters: every `org.bluez.Adapter1` object of the tree, and their coming and going.
struct BlueZAdapterDirectory: AdapterDirectory {
    let system: BlueZSystem

    func adapters() -> [any AdapterBackend] {
        system.tree.objects.filter { $0.value[BlueZAdapterBackend.interface] != nil }.keys.sorted().map {
            BlueZAdapterBackend(system: system, name: $0.lastElement, path: $0)
        }
    }

    func adapterEvents() -> AsyncStream<AdapterEvent> {
        let (stream, continuation) = AsyncStream<AdapterEvent>.makeStream()
        // Listen before listing, so that no change between the two is missed; an adapter both
        // listed and then announced is reported once.
        let changes = system.tree.changes()
        var present = Set<DBusObjectPath>()
        for adapter in adapters() {
            guard let adapter = adapter as? BlueZAdapterBackend else { continue }
            present.insert(adapter.path)
            continuation.yield(.added(Adapter(backend: adapter)))
        }
        let task = Task { [system, present] in
            var present = present
            for await change in changes {
                switch change {
                case .interfacesAdded(let path, let interfaces) where interfaces[BlueZAdapterBackend.interface] != nil:
                    guard present.insert(path).inserted else { continue }
                    continuation.yield(
                        .added(
                            Adapter(backend: BlueZAdapterBackend(system: system, name: path.lastElement, path: path))))
                case .interfacesRemoved(let path, let interfaces)
                where interfaces.contains(BlueZAdapterBackend.interface):
                    guard present.remove(path) != nil else { continue }
                    continuation.yield(.removed(name: path.lastElement))
                default:
                    continue
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}
