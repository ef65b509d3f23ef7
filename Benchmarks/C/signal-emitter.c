/* The peer of the signal figure: emits N BlueZ-shaped PropertiesChanged signals as fast as it can,
 * each carrying {"Value": <20 bytes>} whose first 8 bytes are a little-endian sequence number.
 * usage: signal-emitter ADDRESS N */
#include "bench-common.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: signal-emitter ADDRESS N\n");
        return 2;
    }
    long n = atol(argv[2]);
    DBusConnection *connection = bench_connect(argv[1]);
    bench_mark start = bench_mark_now();
    for (long i = 0; i < n; i++) {
        DBusMessage *signal = bench_properties_changed((uint64_t)i);
        if (!dbus_connection_send(connection, signal, NULL)) bench_die("send", NULL);
        dbus_message_unref(signal);
        /* Wait for the socket now and then, so the daemon's pace bounds what is queued here. */
        if (i % 256 == 255) dbus_connection_flush(connection);
    }
    dbus_connection_flush(connection);
    bench_mark end = bench_mark_now();
    bench_report(n, end.wall - start.wall, start, end, 0, 0, 0);
    dbus_connection_close(connection);
    return 0;
}
