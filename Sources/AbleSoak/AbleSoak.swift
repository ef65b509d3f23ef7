import AbleCommand

/// The `able-soak` program: ``SoakCommand`` on the system's BlueZ.
package enum AbleSoak {
    /// Runs the command line `arguments` (without the program name) as ``SoakCommand``, with
    /// `SIGINT` and `SIGTERM` stopping it (status 130; the soak stops its server so), and returns
    /// the exit status.
    package static func runInterruptibly(_ arguments: [String]) async -> Int32 {
        await AbleCommand.interruptibly(program: SoakCommand.spec.name) {
            let console = Console.standard(json: arguments.contains("--json"))
            return await AbleCommand.run(SoakCommand.self, arguments[...], context: .system(console: console))
        }
    }
}
