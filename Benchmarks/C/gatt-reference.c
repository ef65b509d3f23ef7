/* Reference for the gatt-* figures of `Scripts/bench gatt` (run in the QEMU guest against real
 * bluetoothd): what a C program does with BlueZ's characteristic sockets through libdbus alone.
 *
 *   gatt-reference write ADAPTER SINK_UUID COUNT SIZE
 *     Finds the characteristic SINK_UUID of the connected device on ADAPTER (GetManagedObjects),
 *     acquires its write socket (GattCharacteristic1.AcquireWrite) and writes COUNT values of SIZE
 *     bytes into it with blocking write(2), each carrying its index (little-endian, 4 bytes) and
 *     then 0xA5; waits until bluetoothd has read them all (SIOCOUTQ 0) before closing, since
 *     bluetoothd drops what it had not read when it sees the hang-up.
 *   gatt-reference notify ADAPTER NOTIFY_UUID CONTROL_UUID COUNT SIZE
 *     Acquires the notify socket of NOTIFY_UUID (AcquireNotify), asks the benchmark's server for
 *     COUNT notifications of SIZE bytes by writing CONTROL_UUID (WriteValue, with response), reads
 *     them with blocking read(2) and checks their indexes; gives up after 30 s without a value. Its
 *     result spans the values after the first, from the moment the first was taken to the last
 *     (bench_report_span), with the CPU from the request to the first as `setup`.
 *
 * Prints the result line of bench-common.h plus start=<CLOCK_MONOTONIC seconds of the first write or
 * of the request>, which the Swift side compares with the server's clock (same guest). */
#include "bench-common.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* Returns the object path (malloc'd) of the characteristic with `uuid` under /org/bluez/ADAPTER/. */
static char *find_characteristic(DBusConnection *connection, const char *adapter, const char *uuid) {
    DBusMessage *call = dbus_message_new_method_call(BLUEZ_NAME, "/", DBUS_INTERFACE_OBJECT_MANAGER, "GetManagedObjects");
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, 10000, &error);
    dbus_message_unref(call);
    if (reply == NULL) bench_die("GetManagedObjects", &error);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "/org/bluez/%s/", adapter);
    char *found = NULL;
    DBusMessageIter iter, objects, object, interfaces, interface, properties, property, variant;
    dbus_message_iter_init(reply, &iter);
    dbus_message_iter_recurse(&iter, &objects);
    for (; dbus_message_iter_get_arg_type(&objects) == DBUS_TYPE_DICT_ENTRY && !found;
         dbus_message_iter_next(&objects)) {
        const char *path, *name, *key, *value;
        dbus_message_iter_recurse(&objects, &object);
        dbus_message_iter_get_basic(&object, &path);
        if (strncmp(path, prefix, strlen(prefix)) != 0) continue;
        dbus_message_iter_next(&object);
        dbus_message_iter_recurse(&object, &interfaces);
        for (; dbus_message_iter_get_arg_type(&interfaces) == DBUS_TYPE_DICT_ENTRY; dbus_message_iter_next(&interfaces)) {
            dbus_message_iter_recurse(&interfaces, &interface);
            dbus_message_iter_get_basic(&interface, &name);
            if (strcmp(name, BENCH_GATT_INTERFACE) != 0) continue;
            dbus_message_iter_next(&interface);
            dbus_message_iter_recurse(&interface, &properties);
            for (; dbus_message_iter_get_arg_type(&properties) == DBUS_TYPE_DICT_ENTRY;
                 dbus_message_iter_next(&properties)) {
                dbus_message_iter_recurse(&properties, &property);
                dbus_message_iter_get_basic(&property, &key);
                if (strcmp(key, "UUID") != 0) continue;
                dbus_message_iter_next(&property);
                dbus_message_iter_recurse(&property, &variant);
                dbus_message_iter_get_basic(&variant, &value);
                if (strcasecmp(value, uuid) == 0) found = strdup(path);
            }
        }
    }
    dbus_message_unref(reply);
    if (!found) {
        fprintf(stderr, "no characteristic %s under %s\n", uuid, prefix);
        exit(1);
    }
    return found;
}

static int run_write(DBusConnection *connection, const char *adapter, const char *uuid, long count, int size) {
    char *path = find_characteristic(connection, adapter, uuid);
    uint16_t mtu = 0;
    int fd = bench_acquire(connection, path, "AcquireWrite", &mtu);
    if (size < 4 || size > mtu - 3) {
        fprintf(stderr, "a value of %d bytes does not fit the write socket's MTU of %u\n", size, mtu);
        return 1;
    }
    unsigned char value[512];
    memset(value, 0xA5, sizeof value);
    bench_mark start = bench_mark_now();
    for (long index = 0; index < count; index++) {
        for (int i = 0; i < 4; i++) value[i] = (unsigned char)(index >> (8 * i));
        ssize_t written;
        do written = write(fd, value, (size_t)size);
        while (written < 0 && errno == EINTR);
        if (written != size) {
            perror("write");
            return 1;
        }
    }
    bench_mark end = bench_mark_now();
    for (int waited = 0; waited < 600000; waited++) {
        int unread = 0;
        if (ioctl(fd, SIOCOUTQ, &unread) != 0 || unread == 0) break;
        usleep(1000);
    }
    close(fd);
    printf("start=%.6f mtu=%u\n", start.wall, mtu);
    bench_report(count, end.wall - start.wall, start, end, 0, 0, 0);
    free(path);
    return 0;
}

static void write_control(DBusConnection *connection, const char *path, long count, int size) {
    unsigned char request[7] = {1, (unsigned char)count, (unsigned char)(count >> 8), (unsigned char)(count >> 16),
                                (unsigned char)(count >> 24), (unsigned char)size, (unsigned char)(size >> 8)};
    const unsigned char *bytes = request;
    DBusMessage *call = dbus_message_new_method_call(BLUEZ_NAME, path, BENCH_GATT_INTERFACE, "WriteValue");
    DBusMessageIter iter, array, options;
    dbus_message_iter_init_append(call, &iter);
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "y", &array);
    dbus_message_iter_append_fixed_array(&array, DBUS_TYPE_BYTE, &bytes, (int)sizeof request);
    dbus_message_iter_close_container(&iter, &array);
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &options);
    dbus_message_iter_close_container(&iter, &options);
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, 30000, &error);
    dbus_message_unref(call);
    if (reply == NULL) bench_die("WriteValue", &error);
    dbus_message_unref(reply);
}

static int run_notify(DBusConnection *connection, const char *adapter, const char *uuid, const char *control_uuid,
                      long count, int size) {
    char *path = find_characteristic(connection, adapter, uuid);
    char *control = find_characteristic(connection, adapter, control_uuid);
    uint16_t mtu = 0;
    int fd = bench_acquire(connection, path, "AcquireNotify", &mtu);
    unsigned char value[520];
    long received = 0, lost = 0, reordered = 0;
    uint64_t expected = 0;
    bench_mark start = bench_mark_now();
    bench_mark first = start;
    write_control(connection, control, count, size);
    while (received < count) {
        struct pollfd ready = {.fd = fd, .events = POLLIN};
        if (poll(&ready, 1, 30000) != 1) {
            fprintf(stderr, "no notification for 30 s after %ld of %ld\n", received, count);
            return 1;
        }
        ssize_t length = read(fd, value, sizeof value);
        if (length < 0 && errno == EINTR) continue;
        if (length != size) {
            fprintf(stderr, "a notification of %zd bytes, not %d\n", length, size);
            return 1;
        }
        uint64_t index = (uint64_t)value[0] | (uint64_t)value[1] << 8 | (uint64_t)value[2] << 16
            | (uint64_t)value[3] << 24;
        bench_track_sequence(index, &expected, &lost, &reordered);
        if (received++ == 0) first = bench_mark_now();
    }
    bench_mark end = bench_mark_now();
    close(fd);
    printf("start=%.6f mtu=%u\n", start.wall, mtu);
    bench_report_span(count, start, first, end, lost, reordered, 0);
    free(path);
    free(control);
    return 0;
}

int main(int argc, char **argv) {
    int write_mode = argc == 6 && strcmp(argv[1], "write") == 0;
    int notify_mode = argc == 7 && strcmp(argv[1], "notify") == 0;
    if (!write_mode && !notify_mode) {
        fprintf(stderr, "usage: gatt-reference write ADAPTER SINK_UUID COUNT SIZE\n"
                        "       gatt-reference notify ADAPTER NOTIFY_UUID CONTROL_UUID COUNT SIZE\n");
        return 2;
    }
    DBusError error;
    dbus_error_init(&error);
    DBusConnection *connection = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error);
    if (connection == NULL) bench_die("system bus", &error);
    if (write_mode) return run_write(connection, argv[2], argv[3], atol(argv[4]), atoi(argv[5]));
    return run_notify(connection, argv[2], argv[3], argv[4], atol(argv[5]), atoi(argv[6]));
}
