// The `able-soak` program, one side of Scripts/soak; see AbleSoak.SoakCommand for what it does.
import AbleSoak

#if canImport(Glibc)
    import Glibc
#endif

exit(await AbleSoak.runInterruptibly(Array(CommandLine.arguments.dropFirst())))
