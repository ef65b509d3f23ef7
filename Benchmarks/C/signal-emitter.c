/* The peer of the signal figure: emits N BlueZ-shaped PropertiesChanged signals as fast as it can,
 * each carrying {"Value": <20 bytes>} whose first 8 bytes are a little-endian sequence number.
 * usage: signal-emitter ADDRESS N */
#include "bench-common.h"

static DBusMessage *properties_changed(uint64_t sequence) {
    DBusMessage *signal = dbus_message_new_signal(BENCH_SIGNAL_PATH, DBUS_INTERFACE_PROPERTIES, "PropertiesChanged");
    unsigned char value[BENCH_VALUE_LENGTH];
    for (int i = 0; i < 8; i++) value[i] = (unsigned char)(sequence >> (8 * i));
    for (int i = 8; i < BENCH_VALUE_LENGTH; i++) value[i] = (unsigned char)i;
    const unsigned char *bytes = value;
    const char *interface = BENCH_GATT_INTERFACE, *key = "Value";

    DBusMessageIter iter, changed, entry, variant, array, invalidated;
    dbus_message_iter_init_append(signal, &iter);
    dbus_message_iter_append_basic(&iter, DBUS_TYPE_STRING, &interface);
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &changed);
    dbus_message_iter_open_container(&changed, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
    dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "ay", &variant);
    dbus_message_iter_open_container(&variant, DBUS_TYPE_ARRAY, "y", &array);
    dbus_message_iter_append_fixed_array(&array, DBUS_TYPE_BYTE, &bytes, BENCH_VALUE_LENGTH);
    dbus_message_iter_close_container(&variant, &array);
    dbus_message_iter_close_container(&entry, &variant);
    dbus_message_iter_close_container(&changed, &entry);
    dbus_message_iter_close_container(&iter, &changed);
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "s", &invalidated);
    dbus_message_iter_close_container(&iter, &invalidated);
    return signal;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: signal-emitter ADDRESS N\n");
        return 2;
    }
    long n = atol(argv[2]);
    DBusConnection *connection = bench_connect(argv[1]);
    bench_mark start = bench_mark_now();
    for (long i = 0; i < n; i++) {
        DBusMessage *signal = properties_changed((uint64_t)i);
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
