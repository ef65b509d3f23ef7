/* Helpers shared by the C reference programs of Scripts/bench. */
#ifndef ABLE_BENCH_COMMON_H
#define ABLE_BENCH_COMMON_H

#include <dbus/dbus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_NAME "org.example.Bench"
#define BENCH_PATH "/org/example/Bench"
#define BENCH_INTERFACE "org.example.Bench"
#define BENCH_SIGNAL_PATH "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001/char0002"
#define BENCH_GATT_INTERFACE "org.bluez.GattCharacteristic1"
#define BENCH_VALUE_LENGTH 20

static inline void bench_die(const char *what, DBusError *error) {
    fprintf(stderr, "%s: %s\n", what, error && dbus_error_is_set(error) ? error->message : "failed");
    exit(1);
}

/* Connects to the bus at `address` and registers (Hello), as AbleDBus does. */
static inline DBusConnection *bench_connect(const char *address) {
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_connection_open_private(address, &error);
    if (connection == NULL) bench_die("connect", &error);
    if (!dbus_bus_register(connection, &error)) bench_die("register", &error);
    dbus_connection_set_exit_on_disconnect(connection, 1);
    return connection;
}

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* User and system CPU time of this process, in seconds. */
static inline void bench_cpu(double *user, double *system) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    *user = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6;
    *system = (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
}

typedef struct {
    double wall, user, system;
} bench_mark;

static inline bench_mark bench_mark_now(void) {
    bench_mark mark;
    bench_cpu(&mark.user, &mark.system);
    mark.wall = bench_now();
    return mark;
}

/* The result line that Scripts/bench reads (same format as AbleBenchmarks). */
static inline void bench_report(long ops, double wall, bench_mark start, bench_mark end, long lost, long reordered,
                                long dropped) {
    printf("result ops=%ld wall=%.6f user=%.6f sys=%.6f lost=%ld reordered=%ld dropped=%ld\n", ops, wall,
           end.user - start.user, end.system - start.system, lost, reordered, dropped);
    fflush(stdout);
}

/* Reads the little-endian sequence number from the first 8 bytes of a value. */
static inline uint64_t bench_sequence(const unsigned char *bytes) {
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--) value = (value << 8) | bytes[i];
    return value;
}

#endif
