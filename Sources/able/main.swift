// The `able` command; see AbleCommand for what it does.
import AbleCommand

#if canImport(Glibc)
    import Glibc
#endif

exit(await AbleCommand.runInterruptibly(Array(CommandLine.arguments.dropFirst())))
