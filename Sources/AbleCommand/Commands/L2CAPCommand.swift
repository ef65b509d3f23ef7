import Able

/// `able l2cap`: an echo listener, or a client that sends to a PSM and prints the replies.
struct L2CAPCommand: Command {
    static let spec = CommandSpec(
        name: "l2cap", summary: "listen on or connect to an L2CAP LE channel",
        positionals: ["listen|connect", "ADDRESS", "PSM"], optionalPositionals: 2,
        options: [
            CommandSpec.adapter,
            .init(name: "psm", value: "PSM", help: "listen: the PSM (default: a dynamic one)"),
            .init(name: "channels", value: "N", help: "listen: stop after N channels closed (default: Ctrl-C)"),
            .init(name: "message", value: "TEXT", help: "connect: what to send (default \"hello from able\")"),
            .init(name: "count", value: "N", help: "connect: how many times to send it (default 3)"),
            .init(name: "no-reply", help: "connect: do not wait for each message's echo"),
            CommandSpec.timeout(30, "connecting or waiting for a reply"), CommandSpec.json,
        ],
        details: """
            able l2cap listen [--psm PSM]       echo every SDU back on each channel peers open
            able l2cap connect ADDRESS PSM      send --count messages, print each echo
            """)

    enum Mode {
        case listen(PSM, channels: Int?)
        case connect(BluetoothAddress, PSM, message: [UInt8], count: Int, waitsForReply: Bool)
    }

    var adapter: String?
    var mode: Mode
    var timeout: Duration

    init(_ arguments: ParsedArguments) throws(UsageError) {
        adapter = try arguments.adapterName()
        timeout = try arguments.seconds("timeout", default: .seconds(30))
        switch arguments.positionals[0] {
        case "listen":
            guard arguments.positionals.count == 1 else {
                throw UsageError("listen takes no ADDRESS or PSM: use --psm")
            }
            let psm = try arguments.string("psm").map { text throws(UsageError) in try arguments.psm(text) }
            mode = .listen(psm ?? .automatic, channels: try arguments.int("channels", in: 1...1_000_000))
        case "connect":
            guard arguments.positionals.count == 3 else { throw UsageError("connect needs ADDRESS and PSM") }
            let psm = try arguments.psm(arguments.positionals[2])
            guard psm != .automatic else { throw UsageError("connect needs the peer's PSM, not 0") }
            mode = .connect(
                try arguments.address(arguments.positionals[1]), psm,
                message: Array((arguments.string("message") ?? "hello from able").utf8),
                count: try arguments.int("count", in: 1...1_000_000) ?? 3, waitsForReply: !arguments.flag("no-reply"))
        case let other:
            throw UsageError("the mode is listen or connect, not '\(other)'")
        }
    }

    func run(in context: CommandContext) async throws {
        let adapter = try await context.adapter(self.adapter)
        switch mode {
        case .listen(let psm, let channels):
            try await listen(on: adapter, psm: psm, channels: channels, console: context.console)
        case .connect(let address, let psm, let message, let count, let waitsForReply):
            let timeout = self.timeout
            try await withConnection(to: address, on: adapter, timeout: timeout, console: context.console) {
                peripheral in
                try await Self.exchange(
                    with: peripheral, psm: psm, message: message, count: count, waitsForReply: waitsForReply,
                    timeout: timeout, console: context.console)
            }
        }
    }

    private func listen(on adapter: Adapter, psm: PSM, channels limit: Int?, console: Console) async throws {
        let listener = try await adapter.listenL2CAP(psm: psm)
        console.result(
            "listening on \(adapter.name) \(listener.psm)" + (limit == nil ? " (Ctrl-C to stop)" : ""),
            json: .object([("event", "listening"), ("psm", .int(Int(listener.psm.rawValue)))]))
        do {
            try await withThrowingDiscardingTaskGroup { group in
                var accepted = 0
                for try await channel in listener.channels {
                    accepted += 1
                    let number = accepted
                    let peer = channel.peerAddress.map { "\($0)" } ?? "a peer"
                    console.result(
                        "channel \(number) from \(peer) (send MTU \(channel.sendMTU), receive MTU \(channel.receiveMTU))",
                        json: .object([
                            ("event", "channel"), ("channel", .int(number)), ("peer", .string(peer)),
                            ("sendMTU", .int(channel.sendMTU)), ("receiveMTU", .int(channel.receiveMTU)),
                        ]))
                    group.addTask { await Self.echo(channel, number: number, console: console) }
                    if let limit, accepted >= limit { break }
                }
            }
        } catch {
            await listener.close()
            throw error
        }
        await listener.close()
    }

    /// Echoes every SDU until the peer closes the channel; a channel that fails is reported and
    /// closed, and the listener goes on.
    private static func echo(_ channel: L2CAPChannel, number: Int, console: Console) async {
        var packets = 0
        do {
            for try await packet in channel.packets {
                packets += 1
                try await channel.send(packet)
            }
            console.result(
                "channel \(number) closed by the peer after \(packets) SDUs echoed",
                json: .object([("event", "closed"), ("channel", .int(number)), ("echoed", .int(packets))]))
        } catch {
            let message = (error as? BluetoothError).map(AbleCommand.describe) ?? "\(error)"
            console.result(
                "channel \(number) failed after \(packets) SDUs echoed: \(Console.escaped(message))",
                json: .object([
                    ("event", "failed"), ("channel", .int(number)), ("echoed", .int(packets)),
                    ("error", .string(message)),
                ]))
        }
        await channel.close()
    }

    private static func exchange(
        with peripheral: Peripheral, psm: PSM, message: [UInt8], count: Int, waitsForReply: Bool,
        timeout: Duration, console: Console
    ) async throws {
        let channel = try await peripheral.openL2CAPChannel(psm: psm, timeout: timeout)
        console.result(
            "channel open to \(peripheral.address) \(psm) (send MTU \(channel.sendMTU))",
            json: .object([("event", "open"), ("psm", .int(Int(psm.rawValue))), ("sendMTU", .int(channel.sendMTU))]))
        do {
            var packets = channel.packets.makeAsyncIterator()
            let clock = ContinuousClock()
            for index in 1...count {
                let start = clock.now
                try await channel.send(message)
                guard waitsForReply else {
                    console.result(
                        "sent \(index)", json: .object([("event", "sent"), ("index", .int(index))]))
                    continue
                }
                guard let reply = try await packets.next() else {
                    throw BluetoothError(.disconnected, message: "the peer closed the channel before replying")
                }
                let milliseconds = (clock.now - start).seconds * 1000
                console.result(
                    "reply \(index): \(reply.isMostlyText ? "\"\(Console.escaped(utf8: reply))\"" : reply.hex) in \(milliseconds.formatted(places: 1)) ms",
                    json: .object([
                        ("event", "reply"), ("index", .int(index)), ("value", .bytes(reply)),
                        ("echoed", .bool(reply == message)), ("milliseconds", .double(milliseconds)),
                    ]))
            }
        } catch {
            await channel.close()
            throw error
        }
        await channel.close()
    }
}

extension Double {
    /// The number with `places` digits after the point.
    package func formatted(places: Int) -> String {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let scaled = (self * scale).rounded()
        let whole = Int(scaled / scale)
        let fraction = Int(abs(scaled).truncatingRemainder(dividingBy: scale))
        guard places > 0 else { return String(whole) }
        let digits = String(fraction)
        return
            "\(scaled < 0 && whole == 0 ? "-" : "")\(whole).\(String(repeating: "0", count: places - digits.count))\(digits)"
    }
}
