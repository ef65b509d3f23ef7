package import Able

/// A command line that does not fit its command's usage: the message says what is wrong, and
/// ``AbleCommand`` prints it with the usage and exits with status 64 (`EX_USAGE`).
package struct UsageError: Error, Equatable {
    package var message: String
    package init(_ message: String) { self.message = message }
}

/// What a command accepts: its options, with or without a value, and its positional arguments.
package struct CommandSpec: Sendable {
    package struct Option: Sendable {
        package var name: String
        package var value: String?
        package var help: String
        package var repeatable = false

        package init(name: String, value: String? = nil, help: String, repeatable: Bool = false) {
            self.name = name
            self.value = value
            self.help = help
            self.repeatable = repeatable
        }
    }

    /// The subcommand's name (`read` for `able read`), or the program's own name when
    /// ``isProgram`` is set.
    package var name: String
    package var summary: String
    /// The positional arguments as the usage line shows them, such as `ADDRESS CHARACTERISTIC`.
    package var positionals: [String]
    /// How many of `positionals` may be left out at the end.
    package var optionalPositionals = 0
    package var options: [Option]
    package var details: String = ""
    /// Whether the command is a program of its own (`able-soak`) rather than a subcommand of `able`.
    package var isProgram = false

    package init(
        name: String, summary: String, positionals: [String], optionalPositionals: Int = 0, options: [Option],
        details: String = "", isProgram: Bool = false
    ) {
        self.name = name
        self.summary = summary
        self.positionals = positionals
        self.optionalPositionals = optionalPositionals
        self.options = options
        self.details = details
        self.isProgram = isProgram
    }

    package static let json = Option(name: "json", help: "print JSON Lines, one object per event")
    package static let adapter = Option(
        name: "adapter", value: "NAME", help: "the adapter to use (default: the first, hci0)")
    package static func timeout(_ seconds: Int, _ what: String) -> Option {
        Option(name: "timeout", value: "SECONDS", help: "how long \(what) may take (default \(seconds))")
    }

    /// How the usage line and messages name the command: `able read`, or `able-soak`.
    package var invocation: String { isProgram ? name : "able \(name)" }

    package var usage: String {
        var lines = ["Usage: \(invocation)\(options.isEmpty ? "" : " [options]")\(positionalUsage)", "", summary]
        if !details.isEmpty { lines += ["", details] }
        if !options.isEmpty {
            lines += ["", "Options:"]
            for option in options {
                let left = "  --\(option.name)\(option.value.map { " \($0)" } ?? "")"
                lines.append(left.padding(to: 26) + option.help)
            }
            lines.append("  -h, --help".padding(to: 26) + "show this help")
        }
        return lines.joined(separator: "\n")
    }

    private var positionalUsage: String {
        positionals.enumerated().map { index, name in
            index >= positionals.count - optionalPositionals ? " [\(name)]" : " \(name)"
        }.joined()
    }

    /// Splits `arguments` into options and positionals, checking them against this spec.
    package func parse(_ arguments: some Sequence<String>) throws(UsageError) -> ParsedArguments {
        var parsed = ParsedArguments()
        var iterator = arguments.makeIterator()
        var onlyPositionals = false
        while let argument = iterator.next() {
            if onlyPositionals || !argument.hasPrefix("-") || argument == "-" || Int(argument) != nil {
                parsed.positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            if argument == "-h" || argument == "--help" {
                parsed.wantsHelp = true
                continue
            }
            guard argument.hasPrefix("--") else { throw UsageError("unknown option \(argument)") }
            var name = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let option = options.first(where: { $0.name == name }) else {
                throw UsageError("unknown option --\(name)")
            }
            if let valueName = option.value {
                guard let value = inlineValue ?? iterator.next() else {
                    throw UsageError("--\(name) needs a value (\(valueName))")
                }
                guard option.repeatable || parsed.values[name] == nil else {
                    throw UsageError("--\(name) is given twice")
                }
                parsed.values[name, default: []].append(value)
            } else {
                guard inlineValue == nil else { throw UsageError("--\(name) takes no value") }
                parsed.flags.insert(name)
            }
        }
        guard !parsed.wantsHelp else { return parsed }
        let required = positionals.count - optionalPositionals
        if parsed.positionals.count < required {
            throw UsageError("missing \(positionals[parsed.positionals.count])")
        }
        if parsed.positionals.count > positionals.count {
            throw UsageError("unexpected argument '\(parsed.positionals[positionals.count])'")
        }
        return parsed
    }
}

/// A command line split by ``CommandSpec/parse(_:)``, with typed accessors that throw a
/// ``UsageError`` naming the argument that does not parse.
package struct ParsedArguments {
    package var positionals: [String] = []
    package var values: [String: [String]] = [:]
    package var flags: Set<String> = []
    package var wantsHelp = false

    package func flag(_ name: String) -> Bool { flags.contains(name) }

    package func string(_ name: String) -> String? { values[name]?.last }

    package func strings(_ name: String) -> [String] { values[name] ?? [] }

    package func positional(_ index: Int) -> String? { index < positionals.count ? positionals[index] : nil }

    package func int(_ name: String, in range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let text = string(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw UsageError(
                "--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return value
    }

    package func seconds(_ name: String, default fallback: Duration) throws(UsageError) -> Duration {
        guard let text = string(name) else { return fallback }
        guard let value = Double(text), value > 0, value <= 86_400 else {
            throw UsageError("--\(name) must be a number of seconds above 0, not '\(text)'")
        }
        return .milliseconds(Int64(value * 1000))
    }

    /// The adapter name option `name`, refused when no adapter can have it.
    package func adapterName(_ name: String = "adapter") throws(UsageError) -> String? {
        guard let text = string(name) else { return nil }
        do {
            try InputChecks.adapterName(text)
        } catch {
            throw UsageError("--\(name): \(error.message)")
        }
        return text
    }

    package func uuid(_ text: String, _ what: String) throws(UsageError) -> BluetoothUUID {
        guard let uuid = BluetoothUUID(text) else {
            throw UsageError("\(what) '\(text)' is not a UUID (use 180F, 0000180f-0000-1000-8000-00805f9b34fb, …)")
        }
        return uuid
    }

    package func address(_ text: String) throws(UsageError) -> BluetoothAddress {
        guard let address = BluetoothAddress(text) else {
            throw UsageError("'\(text)' is not a Bluetooth address (use AA:BB:CC:DD:EE:FF)")
        }
        return address
    }

    package func psm(_ text: String) throws(UsageError) -> PSM {
        let value = text.lowercased().hasPrefix("0x") ? UInt16(text.dropFirst(2), radix: 16) : UInt16(text)
        guard let value, value == 0 || PSM.fixedRange.contains(value) || PSM.dynamicRange.contains(value) else {
            throw UsageError("'\(text)' is not an LE PSM (1–255, 0x80–0xFF for dynamic ones, 0 for automatic)")
        }
        return PSM(rawValue: value)
    }
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self + "  " : self + String(repeating: " ", count: width - count)
    }
}
