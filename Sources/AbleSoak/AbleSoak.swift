import AbleCommand
import CLinux

/// The `able-soak` program: ``SoakCommand`` on the system's BlueZ.
package enum AbleSoak {
    /// Runs the command line `arguments` (without the program name) as ``SoakCommand``, with
    /// `SIGINT` and `SIGTERM` stopping it (status 130; the soak stops its server so), and returns
    /// the exit status.
    package static func runInterruptibly(_ arguments: [String]) async -> Int32 {
        // One malloc arena: glibc makes another when threads contend for one, and its first pages
        // stay resident after `malloc_trim`, a step of about 2 MiB of anonymous memory at a moment
        // chance chooses (seen in three 2-minute soaks on 5.82: at a quarter, after the middle,
        // never), which the growth criterion would take for a leak when it comes late.
        mallopt(M_ARENA_MAX, 1)
        return await AbleCommand.interruptibly(program: SoakCommand.spec.name) {
            let console = Console.standard(json: arguments.contains("--json"))
            return await AbleCommand.run(SoakCommand.self, arguments[...], context: .system(console: console))
        }
    }
}
