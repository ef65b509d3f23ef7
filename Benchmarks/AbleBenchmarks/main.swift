// The benchmark command: see Scripts/bench.
print("usage: Scripts/bench dbus")
