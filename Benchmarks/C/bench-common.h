/* Helpers shared by the C reference programs of Scripts/bench. */
#ifndef ABLE_BENCH_COMMON_H
#define ABLE_BENCH_COMMON_H

#include <dbus/dbus.h>
#include <fcntl.h>
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
#ifndef DBUS_INTERFACE_OBJECT_MANAGER
#define DBUS_INTERFACE_OBJECT_MANAGER "org.freedesktop.DBus.ObjectManager"
#endif

/* The fake BlueZ of the central-* and server-* figures (fake-bluez.c) and what it exports. */
#define BLUEZ_NAME "org.bluez"
#define BLUEZ_ADAPTER_PATH "/org/bluez/hci0"
#define BLUEZ_DEVICE_PATH "/org/bluez/hci0/dev_00_AA_01_01_00_01"
#define BLUEZ_SERVICE_PATH "/org/bluez/hci0/dev_00_AA_01_01_00_01/service0001"
#define BLUEZ_CHARACTERISTIC_PATH BENCH_SIGNAL_PATH
#define BLUEZ_SERVICE_UUID "ab1e0001-5a3c-4c8e-9d1f-7b2e4c6a8d00"
#define BLUEZ_CHARACTERISTIC_UUID "ab1e0002-5a3c-4c8e-9d1f-7b2e4c6a8d00"

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

/* The result line of a receiver of `received` values, counted as AbleBenchmarks counts them: the
 * figure spans the values after the first, from the moment the first was taken (`first`) to the end,
 * so that subscribing is not part of the CPU per value; `setup` is the CPU from `start` (just before
 * subscribing) to `first`, in seconds, for the information line of what subscribing costs. */
static inline void bench_report_span(long received, bench_mark start, bench_mark first, bench_mark end, long lost,
                                     long reordered, long dropped) {
    if (received < 2) first = end;
    printf("result ops=%ld wall=%.6f user=%.6f sys=%.6f lost=%ld reordered=%ld dropped=%ld setup=%.6f\n",
           received > 1 ? received - 1 : 0, end.wall - first.wall, end.user - first.user, end.system - first.system,
           lost, reordered, dropped, first.user + first.system - start.user - start.system);
    fflush(stdout);
}

/* Reads the little-endian sequence number from the first 8 bytes of a value. */
static inline uint64_t bench_sequence(const unsigned char *bytes) {
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--) value = (value << 8) | bytes[i];
    return value;
}

/* Counts one received sequence number against the one expected next: the numbers skipped are
 * lost, and one that comes after a higher one is reordered (and was counted lost before). */
static inline void bench_track_sequence(uint64_t sequence, uint64_t *expected, long *lost, long *reordered) {
    if (sequence >= *expected) {
        *lost += (long)(sequence - *expected);
        *expected = sequence + 1;
    } else {
        (*reordered)++;
        (*lost)--;
    }
}

/* Looks `key` up in the a{sv} options `options` is on, walking its entries as a GATT application
 * or bluetoothd does: 1, with the value in `value`, when the key is there with a basic value of
 * `type`; 0 when it is not, has another type, or `options` is no a{sv}. */
static inline int bench_option(DBusMessageIter *options, const char *key, int type, void *value) {
    DBusMessageIter entries, entry, variant;
    if (dbus_message_iter_get_arg_type(options) != DBUS_TYPE_ARRAY ||
        dbus_message_iter_get_element_type(options) != DBUS_TYPE_DICT_ENTRY)
        return 0;
    dbus_message_iter_recurse(options, &entries);
    while (dbus_message_iter_get_arg_type(&entries) == DBUS_TYPE_DICT_ENTRY) {
        const char *name = NULL;
        dbus_message_iter_recurse(&entries, &entry);
        dbus_message_iter_get_basic(&entry, &name);
        dbus_message_iter_next(&entry);
        dbus_message_iter_recurse(&entry, &variant);
        if (strcmp(name, key) == 0) {
            if (dbus_message_iter_get_arg_type(&variant) != type) return 0;
            dbus_message_iter_get_basic(&variant, value);
            return 1;
        }
        dbus_message_iter_next(&entries);
    }
    return 0;
}

/* Calls AcquireWrite or AcquireNotify on the characteristic at `path` with empty options; returns
 * the descriptor, made blocking, and the MTU BlueZ reported. */
static inline int bench_acquire(DBusConnection *connection, const char *path, const char *method, uint16_t *mtu) {
    DBusMessage *call = dbus_message_new_method_call(BLUEZ_NAME, path, BENCH_GATT_INTERFACE, method);
    DBusMessageIter iter, options;
    dbus_message_iter_init_append(call, &iter);
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &options);
    dbus_message_iter_close_container(&iter, &options);
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, 10000, &error);
    dbus_message_unref(call);
    if (reply == NULL) bench_die(method, &error);
    int fd = -1;
    if (!dbus_message_get_args(reply, &error, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_UINT16, mtu, DBUS_TYPE_INVALID))
        bench_die(method, &error);
    dbus_message_unref(reply);
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

/* Builds one BlueZ notification: PropertiesChanged("org.bluez.GattCharacteristic1",
 * {"Value": <20 bytes, the first 8 a little-endian sequence number>}, []) from BENCH_SIGNAL_PATH. */
static inline DBusMessage *bench_properties_changed(uint64_t sequence) {
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

/* --- Building a{sv} property dictionaries ----------------------------------------------------- */

/* Appends {key: <value>} to an open a{sv}, the value a basic type. */
static inline void bench_entry_basic(DBusMessageIter *dict, const char *key, int type, const void *value) {
    char signature[2] = {(char)type, 0};
    DBusMessageIter entry, variant;
    dbus_message_iter_open_container(dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
    dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, signature, &variant);
    dbus_message_iter_append_basic(&variant, type, value);
    dbus_message_iter_close_container(&entry, &variant);
    dbus_message_iter_close_container(dict, &entry);
}

static inline void bench_entry_string(DBusMessageIter *dict, const char *key, const char *value) {
    bench_entry_basic(dict, key, DBUS_TYPE_STRING, &value);
}

static inline void bench_entry_path(DBusMessageIter *dict, const char *key, const char *value) {
    bench_entry_basic(dict, key, DBUS_TYPE_OBJECT_PATH, &value);
}

static inline void bench_entry_bool(DBusMessageIter *dict, const char *key, int value) {
    dbus_bool_t boolean = value ? TRUE : FALSE;
    bench_entry_basic(dict, key, DBUS_TYPE_BOOLEAN, &boolean);
}

static inline void bench_entry_uint16(DBusMessageIter *dict, const char *key, dbus_uint16_t value) {
    bench_entry_basic(dict, key, DBUS_TYPE_UINT16, &value);
}

/* Appends {key: <as>}. */
static inline void bench_entry_strings(DBusMessageIter *dict, const char *key, const char *const *values, int count) {
    DBusMessageIter entry, variant, array;
    dbus_message_iter_open_container(dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
    dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "as", &variant);
    dbus_message_iter_open_container(&variant, DBUS_TYPE_ARRAY, "s", &array);
    for (int i = 0; i < count; i++) dbus_message_iter_append_basic(&array, DBUS_TYPE_STRING, &values[i]);
    dbus_message_iter_close_container(&variant, &array);
    dbus_message_iter_close_container(&entry, &variant);
    dbus_message_iter_close_container(dict, &entry);
}

/* Appends {key: <ay>}. */
static inline void bench_entry_bytes(DBusMessageIter *dict, const char *key, const unsigned char *bytes, int count) {
    DBusMessageIter entry, variant, array;
    dbus_message_iter_open_container(dict, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &key);
    dbus_message_iter_open_container(&entry, DBUS_TYPE_VARIANT, "ay", &variant);
    dbus_message_iter_open_container(&variant, DBUS_TYPE_ARRAY, "y", &array);
    dbus_message_iter_append_fixed_array(&array, DBUS_TYPE_BYTE, &bytes, count);
    dbus_message_iter_close_container(&variant, &array);
    dbus_message_iter_close_container(&entry, &variant);
    dbus_message_iter_close_container(dict, &entry);
}

/* Sends an error reply to a method call that expects one. */
static inline void bench_reply_error(DBusConnection *connection, DBusMessage *call, const char *name,
                                     const char *message) {
    if (dbus_message_get_no_reply(call)) return;
    DBusMessage *reply = dbus_message_new_error(call, name, message);
    dbus_connection_send(connection, reply, NULL);
    dbus_message_unref(reply);
}

/* Sends an empty method return. */
static inline void bench_reply_empty(DBusConnection *connection, DBusMessage *call) {
    if (dbus_message_get_no_reply(call)) return;
    DBusMessage *reply = dbus_message_new_method_return(call);
    dbus_connection_send(connection, reply, NULL);
    dbus_message_unref(reply);
}

/* The unique name owning `name` now, or NULL (the caller frees it). */
static inline char *bench_name_owner(DBusConnection *connection, const char *name) {
    DBusMessage *call = dbus_message_new_method_call(DBUS_SERVICE_DBUS, DBUS_PATH_DBUS, DBUS_INTERFACE_DBUS,
                                                     "GetNameOwner");
    dbus_message_append_args(call, DBUS_TYPE_STRING, &name, DBUS_TYPE_INVALID);
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, 25000, &error);
    dbus_message_unref(call);
    if (reply == NULL) {
        dbus_error_free(&error);
        return NULL;
    }
    const char *owner = NULL;
    char *copy = NULL;
    if (dbus_message_get_args(reply, &error, DBUS_TYPE_STRING, &owner, DBUS_TYPE_INVALID)) copy = strdup(owner);
    dbus_error_free(&error);
    dbus_message_unref(reply);
    return copy;
}

/* Watches `unique_name` leave the bus (NameOwnerChanged with it as arg0). */
static inline void bench_watch_name(DBusConnection *connection, const char *unique_name) {
    char rule[512];
    snprintf(rule, sizeof rule,
             "type='signal',sender='" DBUS_SERVICE_DBUS "',interface='" DBUS_INTERFACE_DBUS
             "',member='NameOwnerChanged',arg0='%s'",
             unique_name);
    dbus_bus_add_match(connection, rule, NULL);
}

/* Whether a message says that `unique_name` left the bus. */
static inline int bench_name_left(DBusMessage *message, const char *unique_name) {
    const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
    if (unique_name == NULL || !dbus_message_is_signal(message, DBUS_INTERFACE_DBUS, "NameOwnerChanged")) return 0;
    if (!dbus_message_get_args(message, NULL, DBUS_TYPE_STRING, &name, DBUS_TYPE_STRING, &old_owner,
                               DBUS_TYPE_STRING, &new_owner, DBUS_TYPE_INVALID))
        return 0;
    return strcmp(name, unique_name) == 0 && new_owner[0] == 0;
}

#endif
