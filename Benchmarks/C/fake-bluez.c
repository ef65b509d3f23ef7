/* A stand-in for bluetoothd on the private bus of Scripts/bench. It owns org.bluez and exports,
 * under an ObjectManager at /, an adapter /org/bluez/hci0 (Adapter1, GattManager1), a connected
 * device with resolved services, one of its GATT services and a characteristic that notifies.
 * It answers GetManagedObjects, Properties.GetAll, Device1.Connect/Disconnect,
 * GattCharacteristic1.StartNotify/StopNotify and GattManager1.RegisterApplication/Unregister-
 * Application. Prints READY once it owns org.bluez.
 *
 *   fake-bluez ADDRESS notify N [PER_SECOND]
 *     For central-notifications: on the first StartNotify it answers, then emits N
 *     PropertiesChanged(GattCharacteristic1, {Value: 20 bytes, sequence number first}, []) from
 *     the characteristic as fast as it can, and prints its own result line. With PER_SECOND
 *     (central-notifications-paced) it emits them at that pace instead, each flushed on its own,
 *     as a real link delivers notifications: one at a time, each in its own readiness event.
 *
 *   fake-bluez ADDRESS readvalue N WINDOW WARMUP [bluez-options]
 *     For server-readvalue: on RegisterApplication it reads the application back with
 *     GetManagedObjects (as bluetoothd does), records the first GattCharacteristic1, answers, and
 *     then, as the org.bluez connection (the only caller a GATT application accepts), calls
 *     ReadValue(a{sv}) on it WARMUP times and then N times, WINDOW calls in flight, checking that
 *     each answer is 20 bytes. Prints the result line of the N measured calls. The options are
 *     empty, or with `bluez-options` what bluetoothd 5.66 sends: device, link and mtu.
 *
 *   fake-bluez ADDRESS notify-socket N [PER_SECOND]
 *     For central-notify-socket: answers GattCharacteristic1.AcquireNotify with one end of an AF_UNIX
 *     SOCK_SEQPACKET socketpair (and MTU 247), as bluetoothd does, then writes N values of 20 bytes
 *     (sequence number first) into its end, one message each, as fast as the socket takes them or
 *     at PER_SECOND (as a link delivers notifications: one at a time); prints its result line.
 *
 *   fake-bluez ADDRESS write-socket N [PER_SECOND]
 *     For central-write-socket: answers AcquireWrite the same way, then reads N messages from its
 *     end with blocking reads (at most PER_SECOND a second, as a link takes Write Commands), checks
 *     that each is 20 bytes with the next sequence number, and prints its result line (the rate is
 *     the drain's: from the first message to the last).
 *
 *   fake-bluez ADDRESS write-dbus N
 *     For central-write-dbus: refuses AcquireWrite (NotSupported, as a BlueZ does for a
 *     characteristic it will not give a socket for) and answers GattCharacteristic1.WriteValue(ay,
 *     a{sv}) at once, as bluetoothd answers a Write Command (options type "command"); checks that
 *     each value is 20 bytes with the next sequence number, and after N prints its result line (the
 *     rate from the first write to the last).
 *
 * In the socket modes and in write-dbus it then serves until the client leaves the bus (it may
 * still call Disconnect).
 * In notify mode it then serves until the subscriber leaves (StopNotify, or its connection
 * closes), or 10 s pass; in readvalue mode it leaves the bus as soon as every call is answered
 * (the server then knows the load is over: a server's handler runs before its reply is sent). */
#include "bench-common.h"

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

enum mode { NOTIFY, READVALUE, NOTIFY_SOCKET, WRITE_SOCKET, WRITE_DBUS };

static DBusConnection *connection;
static enum mode mode;
static long count, window, warmup, per_second;
static int bluez_options;

/* What the filter saw, acted on by the main loop (outside dispatch). */
static int start_requested, emitted, peer_left, unregistered;
/* The fake's end of the acquired socketpair, once acquired. */
static int socket_end = -1;
static char *peer; /* the subscriber or the application's owner */
static DBusMessage *registration;
static char *characteristic;

/* --- The object tree --------------------------------------------------------------------------- */

static void adapter_properties(DBusMessageIter *dict) {
    bench_entry_string(dict, "Address", "00:AA:01:00:00:00");
    bench_entry_string(dict, "AddressType", "public");
    bench_entry_string(dict, "Name", "fake-hci0");
    bench_entry_string(dict, "Alias", "fake-hci0");
    bench_entry_bool(dict, "Powered", 1);
    bench_entry_bool(dict, "Discoverable", 0);
    bench_entry_bool(dict, "Pairable", 1);
    bench_entry_bool(dict, "Discovering", 0);
}

static void no_properties(DBusMessageIter *dict) { (void)dict; }

static void device_properties(DBusMessageIter *dict) {
    bench_entry_string(dict, "Address", "00:AA:01:01:00:01");
    bench_entry_string(dict, "AddressType", "public");
    bench_entry_string(dict, "Name", "bench-peripheral");
    bench_entry_string(dict, "Alias", "bench-peripheral");
    bench_entry_path(dict, "Adapter", BLUEZ_ADAPTER_PATH);
    bench_entry_bool(dict, "Paired", 0);
    bench_entry_bool(dict, "Bonded", 0);
    bench_entry_bool(dict, "Trusted", 0);
    bench_entry_bool(dict, "Connected", 1);
    bench_entry_bool(dict, "ServicesResolved", 1);
    const char *uuids[] = {BLUEZ_SERVICE_UUID};
    bench_entry_strings(dict, "UUIDs", uuids, 1);
}

static void service_properties(DBusMessageIter *dict) {
    bench_entry_string(dict, "UUID", BLUEZ_SERVICE_UUID);
    bench_entry_path(dict, "Device", BLUEZ_DEVICE_PATH);
    bench_entry_bool(dict, "Primary", 1);
}

static void characteristic_properties(DBusMessageIter *dict) {
    bench_entry_string(dict, "UUID", BLUEZ_CHARACTERISTIC_UUID);
    bench_entry_path(dict, "Service", BLUEZ_SERVICE_PATH);
    bench_entry_bytes(dict, "Value", (const unsigned char *)"", 0);
    bench_entry_bool(dict, "Notifying", 0);
    const char *flags[] = {"read", "notify", "write-without-response"};
    bench_entry_strings(dict, "Flags", flags, 3);
    bench_entry_uint16(dict, "MTU", 23);
}

typedef struct {
    const char *path, *interface;
    void (*properties)(DBusMessageIter *dict);
} exported_interface;

/* Grouped by object, objects in path order. */
static const exported_interface tree[] = {
    {BLUEZ_ADAPTER_PATH, "org.bluez.Adapter1", adapter_properties},
    {BLUEZ_ADAPTER_PATH, "org.bluez.GattManager1", no_properties},
    {BLUEZ_DEVICE_PATH, "org.bluez.Device1", device_properties},
    {BLUEZ_SERVICE_PATH, "org.bluez.GattService1", service_properties},
    {BLUEZ_CHARACTERISTIC_PATH, BENCH_GATT_INTERFACE, characteristic_properties},
};
#define TREE_SIZE ((int)(sizeof tree / sizeof tree[0]))

static void append_properties(DBusMessageIter *iter, const exported_interface *interface) {
    DBusMessageIter dict;
    dbus_message_iter_open_container(iter, DBUS_TYPE_ARRAY, "{sv}", &dict);
    interface->properties(&dict);
    dbus_message_iter_close_container(iter, &dict);
}

static void get_managed_objects(DBusMessage *call) {
    DBusMessage *reply = dbus_message_new_method_return(call);
    DBusMessageIter iter, objects, object, interfaces, entry;
    dbus_message_iter_init_append(reply, &iter);
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{oa{sa{sv}}}", &objects);
    for (int i = 0; i < TREE_SIZE;) {
        const char *path = tree[i].path;
        dbus_message_iter_open_container(&objects, DBUS_TYPE_DICT_ENTRY, NULL, &object);
        dbus_message_iter_append_basic(&object, DBUS_TYPE_OBJECT_PATH, &path);
        dbus_message_iter_open_container(&object, DBUS_TYPE_ARRAY, "{sa{sv}}", &interfaces);
        for (; i < TREE_SIZE && strcmp(tree[i].path, path) == 0; i++) {
            dbus_message_iter_open_container(&interfaces, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
            dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &tree[i].interface);
            append_properties(&entry, &tree[i]);
            dbus_message_iter_close_container(&interfaces, &entry);
        }
        dbus_message_iter_close_container(&object, &interfaces);
        dbus_message_iter_close_container(&objects, &object);
    }
    dbus_message_iter_close_container(&iter, &objects);
    dbus_connection_send(connection, reply, NULL);
    dbus_message_unref(reply);
}

static void get_all(DBusMessage *call) {
    const char *interface = NULL;
    if (!dbus_message_get_args(call, NULL, DBUS_TYPE_STRING, &interface, DBUS_TYPE_INVALID)) {
        bench_reply_error(connection, call, DBUS_ERROR_INVALID_ARGS, "GetAll takes one string");
        return;
    }
    for (int i = 0; i < TREE_SIZE; i++) {
        if (strcmp(tree[i].path, dbus_message_get_path(call)) != 0 || strcmp(tree[i].interface, interface) != 0)
            continue;
        DBusMessage *reply = dbus_message_new_method_return(call);
        DBusMessageIter iter;
        dbus_message_iter_init_append(reply, &iter);
        append_properties(&iter, &tree[i]);
        dbus_connection_send(connection, reply, NULL);
        dbus_message_unref(reply);
        return;
    }
    bench_reply_error(connection, call, DBUS_ERROR_UNKNOWN_INTERFACE, "no such interface here");
}

static void set_peer(const char *name) {
    if (peer != NULL) return;
    peer = strdup(name);
    bench_watch_name(connection, peer);
}

/* Answers AcquireNotify (notify-socket mode) or AcquireWrite (write-socket mode) with one end of a
 * socketpair, keeping the other; refuses a second one, and the method of the other mode. */
static void acquire(DBusMessage *call) {
    int wants_notify = dbus_message_is_method_call(call, BENCH_GATT_INTERFACE, "AcquireNotify");
    if ((mode != NOTIFY_SOCKET || !wants_notify) && (mode != WRITE_SOCKET || wants_notify)) {
        bench_reply_error(connection, call, "org.bluez.Error.NotSupported", "Not Supported");
        return;
    }
    if (socket_end >= 0) {
        bench_reply_error(connection, call, "org.bluez.Error.NotPermitted", "Notify acquired");
        return;
    }
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) bench_die("socketpair", NULL);
    dbus_uint16_t mtu = 247;
    DBusMessage *reply = dbus_message_new_method_return(call);
    dbus_message_append_args(reply, DBUS_TYPE_UNIX_FD, &pair[1], DBUS_TYPE_UINT16, &mtu, DBUS_TYPE_INVALID);
    dbus_connection_send(connection, reply, NULL);
    dbus_message_unref(reply);
    close(pair[1]); /* the message holds its own duplicate */
    socket_end = pair[0];
    set_peer(dbus_message_get_sender(call));
    start_requested = 1;
}

/* write-dbus: what the WriteValue calls carried. */
static long dbus_writes, dbus_lost, dbus_reordered;
static uint64_t dbus_expected;
static bench_mark dbus_first;

/* The bytes of `message`'s first argument, an `ay`, and their count in `length`; dies with `what`
 * when the first argument is not one. Leaves `iter` on that argument. */
static const unsigned char *leading_bytes(DBusMessage *message, DBusMessageIter *iter, int *length, const char *what) {
    DBusMessageIter array;
    const unsigned char *bytes = NULL;
    *length = 0;
    if (!dbus_message_iter_init(message, iter) || dbus_message_iter_get_arg_type(iter) != DBUS_TYPE_ARRAY ||
        dbus_message_iter_get_element_type(iter) != DBUS_TYPE_BYTE)
        bench_die(what, NULL);
    dbus_message_iter_recurse(iter, &array);
    dbus_message_iter_get_fixed_array(&array, &bytes, length);
    return bytes;
}

/* Answers WriteValue (write-dbus mode) at once, after checking the value and its sequence number. */
static void write_value(DBusMessage *call) {
    if (mode != WRITE_DBUS) {
        bench_reply_error(connection, call, "org.bluez.Error.NotSupported", "Not Supported");
        return;
    }
    DBusMessageIter iter;
    int length;
    const unsigned char *bytes = leading_bytes(call, &iter, &length, "WriteValue arguments are not (ay, a{sv})");
    const char *type = NULL;
    if (!dbus_message_iter_next(&iter) || !bench_option(&iter, "type", DBUS_TYPE_STRING, &type) ||
        strcmp(type, "command") != 0)
        bench_die("WriteValue without type command", NULL);
    if (length != BENCH_VALUE_LENGTH) bench_die("a written value is not 20 bytes", NULL);
    if (dbus_writes == 0) dbus_first = bench_mark_now();
    bench_track_sequence(bench_sequence(bytes), &dbus_expected, &dbus_lost, &dbus_reordered);
    dbus_writes++;
    bench_reply_empty(connection, call);
    set_peer(dbus_message_get_sender(call));
}

static DBusHandlerResult filter(DBusConnection *unused, DBusMessage *message, void *data) {
    (void)unused;
    (void)data;
    if (bench_name_left(message, peer)) {
        peer_left = 1;
        return DBUS_HANDLER_RESULT_HANDLED;
    }
    if (dbus_message_get_type(message) != DBUS_MESSAGE_TYPE_METHOD_CALL) return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const char *path = dbus_message_get_path(message);
    if (dbus_message_is_method_call(message, DBUS_INTERFACE_OBJECT_MANAGER, "GetManagedObjects") &&
        strcmp(path, "/") == 0) {
        get_managed_objects(message);
    } else if (dbus_message_is_method_call(message, DBUS_INTERFACE_PROPERTIES, "GetAll")) {
        get_all(message);
    } else if ((dbus_message_is_method_call(message, "org.bluez.Device1", "Connect") ||
                dbus_message_is_method_call(message, "org.bluez.Device1", "Disconnect")) &&
               strcmp(path, BLUEZ_DEVICE_PATH) == 0) {
        bench_reply_empty(connection, message);
    } else if (dbus_message_is_method_call(message, BENCH_GATT_INTERFACE, "StartNotify") &&
               strcmp(path, BLUEZ_CHARACTERISTIC_PATH) == 0) {
        bench_reply_empty(connection, message);
        if (mode == NOTIFY && !start_requested) {
            set_peer(dbus_message_get_sender(message));
            start_requested = 1;
        }
    } else if (dbus_message_is_method_call(message, BENCH_GATT_INTERFACE, "StopNotify") &&
               strcmp(path, BLUEZ_CHARACTERISTIC_PATH) == 0) {
        bench_reply_empty(connection, message);
        if (mode == NOTIFY && emitted) peer_left = 1;
    } else if ((dbus_message_is_method_call(message, BENCH_GATT_INTERFACE, "AcquireNotify") ||
                dbus_message_is_method_call(message, BENCH_GATT_INTERFACE, "AcquireWrite")) &&
               strcmp(path, BLUEZ_CHARACTERISTIC_PATH) == 0) {
        acquire(message);
    } else if (dbus_message_is_method_call(message, BENCH_GATT_INTERFACE, "WriteValue") &&
               strcmp(path, BLUEZ_CHARACTERISTIC_PATH) == 0) {
        write_value(message);
    } else if (dbus_message_is_method_call(message, "org.bluez.GattManager1", "RegisterApplication") &&
               strcmp(path, BLUEZ_ADAPTER_PATH) == 0) {
        if (mode != READVALUE || registration != NULL || peer != NULL) {
            bench_reply_error(connection, message, "org.bluez.Error.AlreadyExists", "Already Exists");
        } else {
            set_peer(dbus_message_get_sender(message));
            registration = dbus_message_ref(message);
        }
    } else if (dbus_message_is_method_call(message, "org.bluez.GattManager1", "UnregisterApplication") &&
               strcmp(path, BLUEZ_ADAPTER_PATH) == 0) {
        bench_reply_empty(connection, message);
        unregistered = 1;
    } else {
        bench_reply_error(connection, message, DBUS_ERROR_UNKNOWN_METHOD, "the fake BlueZ does not answer this");
    }
    return DBUS_HANDLER_RESULT_HANDLED;
}

/* --- notify: the emitter ------------------------------------------------------------------------ */

static void emit(void) {
    dbus_connection_flush(connection); /* the StartNotify reply goes first */
    bench_mark start = bench_mark_now();
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long i = 0; i < count; i++) {
        DBusMessage *signal = bench_properties_changed((uint64_t)i);
        if (!dbus_connection_send(connection, signal, NULL)) bench_die("send", NULL);
        dbus_message_unref(signal);
        if (per_second > 0) {
            /* On an absolute schedule, so that a late wake-up does not slow the pace down. */
            dbus_connection_flush(connection);
            next.tv_nsec += 1000000000L / per_second;
            while (next.tv_nsec >= 1000000000L) {
                next.tv_nsec -= 1000000000L;
                next.tv_sec += 1;
            }
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR) {
            }
        } else if (i % 256 == 255) {
            /* Wait for the socket now and then, so the daemon's pace bounds what is queued here. */
            dbus_connection_flush(connection);
        }
    }
    dbus_connection_flush(connection);
    bench_mark end = bench_mark_now();
    bench_report(count, end.wall - start.wall, start, end, 0, 0, 0);
    emitted = 1;
}

/* --- notify-socket and write-socket: the fake's end of the socket ------------------------------- */

/* Waits until the next tick of a PER_SECOND schedule (absolute, so a late wake-up does not slow it). */
static void pace(struct timespec *next) {
    next->tv_nsec += 1000000000L / per_second;
    while (next->tv_nsec >= 1000000000L) {
        next->tv_nsec -= 1000000000L;
        next->tv_sec += 1;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, next, NULL) == EINTR) {
    }
}

static void feed_socket(void) {
    dbus_connection_flush(connection); /* the AcquireNotify reply goes first */
    bench_mark start = bench_mark_now();
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (long i = 0; i < count; i++) {
        unsigned char value[BENCH_VALUE_LENGTH];
        for (int b = 0; b < 8; b++) value[b] = (unsigned char)((uint64_t)i >> (8 * b));
        for (int b = 8; b < BENCH_VALUE_LENGTH; b++) value[b] = (unsigned char)b;
        ssize_t written;
        do written = send(socket_end, value, sizeof value, MSG_NOSIGNAL);
        while (written < 0 && errno == EINTR);
        if (written != (ssize_t)sizeof value) bench_die("writing a notification into the socket", NULL);
        if (per_second > 0) pace(&next);
    }
    bench_mark end = bench_mark_now();
    bench_report(count, end.wall - start.wall, start, end, 0, 0, 0);
    emitted = 1;
}

static void drain_socket(void) {
    dbus_connection_flush(connection); /* the AcquireWrite reply goes first */
    long lost = 0, reordered = 0;
    uint64_t expected = 0;
    bench_mark start = {0};
    struct timespec next;
    for (long i = 0; i < count; i++) {
        unsigned char value[600];
        ssize_t length;
        do length = recv(socket_end, value, sizeof value, 0);
        while (length < 0 && errno == EINTR);
        if (length == 0) {
            fprintf(stderr, "the writer closed the socket after %ld of %ld values\n", i, count);
            exit(1);
        }
        if (length != BENCH_VALUE_LENGTH) bench_die("a written value is not 20 bytes", NULL);
        if (i == 0) {
            start = bench_mark_now();
            clock_gettime(CLOCK_MONOTONIC, &next);
        }
        bench_track_sequence(bench_sequence(value), &expected, &lost, &reordered);
        if (per_second > 0) pace(&next);
    }
    bench_mark end = bench_mark_now();
    bench_report(count, end.wall - start.wall, start, end, lost, reordered, 0);
    emitted = 1;
}

/* --- readvalue: registration and the load -------------------------------------------------------- */

/* Reads the application back, as bluetoothd does, and keeps its first characteristic's path. */
static void register_application(void) {
    DBusMessageIter iter, objects, object, interfaces, entry;
    const char *root = NULL;
    if (!dbus_message_iter_init(registration, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_OBJECT_PATH)
        bench_die("RegisterApplication arguments", NULL);
    dbus_message_iter_get_basic(&iter, &root);

    DBusMessage *call = dbus_message_new_method_call(peer, root, DBUS_INTERFACE_OBJECT_MANAGER, "GetManagedObjects");
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, 25000, &error);
    dbus_message_unref(call);
    if (reply == NULL) bench_die("GetManagedObjects of the application", &error);
    if (!dbus_message_iter_init(reply, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_ARRAY)
        bench_die("GetManagedObjects reply", NULL);
    dbus_message_iter_recurse(&iter, &objects);
    while (characteristic == NULL && dbus_message_iter_get_arg_type(&objects) == DBUS_TYPE_DICT_ENTRY) {
        const char *path = NULL, *interface = NULL;
        dbus_message_iter_recurse(&objects, &object);
        dbus_message_iter_get_basic(&object, &path);
        dbus_message_iter_next(&object);
        dbus_message_iter_recurse(&object, &interfaces);
        while (dbus_message_iter_get_arg_type(&interfaces) == DBUS_TYPE_DICT_ENTRY) {
            dbus_message_iter_recurse(&interfaces, &entry);
            dbus_message_iter_get_basic(&entry, &interface);
            if (strcmp(interface, BENCH_GATT_INTERFACE) == 0) characteristic = strdup(path);
            dbus_message_iter_next(&interfaces);
        }
        dbus_message_iter_next(&objects);
    }
    dbus_message_unref(reply);
    if (characteristic == NULL) {
        bench_reply_error(connection, registration, "org.bluez.Error.Failed", "No characteristic");
        bench_die("the application has no characteristic", NULL);
    }
    bench_reply_empty(connection, registration);
    dbus_message_unref(registration);
    registration = NULL;
}

static long sent, completed, target;

static void send_read(void);

static void read_completed(DBusPendingCall *pending, void *data) {
    (void)data;
    DBusMessage *reply = dbus_pending_call_steal_reply(pending);
    dbus_pending_call_unref(pending);
    if (reply == NULL) bench_die("ReadValue: no reply", NULL);
    if (dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_ERROR) {
        const char *text = NULL;
        dbus_message_get_args(reply, NULL, DBUS_TYPE_STRING, &text, DBUS_TYPE_INVALID);
        fprintf(stderr, "ReadValue: %s: %s\n", dbus_message_get_error_name(reply), text ? text : "");
        exit(1);
    }
    DBusMessageIter iter;
    int length;
    leading_bytes(reply, &iter, &length, "ReadValue reply is not ay");
    if (length != BENCH_VALUE_LENGTH) bench_die("ReadValue reply is not 20 bytes", NULL);
    dbus_message_unref(reply);
    completed++;
    if (sent < target) send_read();
}

static void send_read(void) {
    DBusMessage *call = dbus_message_new_method_call(peer, characteristic, BENCH_GATT_INTERFACE, "ReadValue");
    DBusMessageIter iter, options;
    dbus_message_iter_init_append(call, &iter);
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &options);
    if (bluez_options) {
        bench_entry_path(&options, "device", BLUEZ_DEVICE_PATH);
        bench_entry_string(&options, "link", "LE");
        bench_entry_uint16(&options, "mtu", 23);
    }
    dbus_message_iter_close_container(&iter, &options);
    DBusPendingCall *pending = NULL;
    if (!dbus_connection_send_with_reply(connection, call, &pending, 25000) || pending == NULL)
        bench_die("send ReadValue", NULL);
    dbus_message_unref(call);
    dbus_pending_call_set_notify(pending, read_completed, NULL, NULL);
    sent++;
}

static void reads(long n) {
    sent = completed = 0;
    target = n;
    while (sent < target && sent < window) send_read();
    while (completed < target) {
        if (!dbus_connection_read_write_dispatch(connection, -1)) bench_die("disconnected", NULL);
        if (peer_left) {
            fprintf(stderr, "the application left during the load (%ld of %ld answered)\n", completed, target);
            exit(1);
        }
    }
}

/* --- Main ---------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    if ((argc == 4 || argc == 5) && strcmp(argv[2], "notify") == 0) {
        mode = NOTIFY;
        count = atol(argv[3]);
        per_second = argc == 5 ? atol(argv[4]) : 0;
    } else if ((argc == 4 || argc == 5) &&
               (strcmp(argv[2], "notify-socket") == 0 || strcmp(argv[2], "write-socket") == 0)) {
        mode = strcmp(argv[2], "notify-socket") == 0 ? NOTIFY_SOCKET : WRITE_SOCKET;
        count = atol(argv[3]);
        per_second = argc == 5 ? atol(argv[4]) : 0;
    } else if (argc == 4 && strcmp(argv[2], "write-dbus") == 0) {
        mode = WRITE_DBUS;
        count = atol(argv[3]);
    } else if ((argc == 6 || (argc == 7 && strcmp(argv[6], "bluez-options") == 0)) &&
               strcmp(argv[2], "readvalue") == 0) {
        mode = READVALUE;
        count = atol(argv[3]);
        window = atol(argv[4]);
        warmup = atol(argv[5]);
        bluez_options = argc == 7;
    } else {
        fprintf(stderr, "usage: fake-bluez ADDRESS notify N [PER_SECOND]\n"
                        "       fake-bluez ADDRESS notify-socket|write-socket N [PER_SECOND]\n"
                        "       fake-bluez ADDRESS write-dbus N\n"
                        "       fake-bluez ADDRESS readvalue N WINDOW WARMUP [bluez-options]\n");
        return 2;
    }
    connection = bench_connect(argv[1]);
    dbus_connection_add_filter(connection, filter, NULL, NULL);
    DBusError error;
    dbus_error_init(&error);
    if (dbus_bus_request_name(connection, BLUEZ_NAME, DBUS_NAME_FLAG_DO_NOT_QUEUE, &error) !=
        DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER)
        bench_die("request org.bluez", &error);
    printf("READY\n");
    fflush(stdout);

    int finished = 0;
    double began = bench_now(), finished_at = 0;
    while (!(finished && peer_left)) {
        if (!dbus_connection_read_write_dispatch(connection, 100)) bench_die("disconnected", NULL);
        if (mode == NOTIFY && start_requested && !emitted) {
            emit();
            finished = 1;
            finished_at = bench_now();
        }
        if ((mode == NOTIFY_SOCKET || mode == WRITE_SOCKET) && start_requested && !emitted) {
            if (mode == NOTIFY_SOCKET)
                feed_socket();
            else
                drain_socket();
            finished = 1;
            finished_at = bench_now();
        }
        if (mode == WRITE_DBUS && dbus_writes == count && !emitted) {
            bench_mark end = bench_mark_now();
            bench_report(count, end.wall - dbus_first.wall, dbus_first, end, dbus_lost, dbus_reordered, 0);
            emitted = 1;
            finished = 1;
            finished_at = bench_now();
        }

        if (mode == READVALUE && registration != NULL) {
            register_application();
            reads(warmup);
            bench_mark start = bench_mark_now();
            reads(count);
            bench_mark end = bench_mark_now();
            bench_report(count, end.wall - start.wall, start, end, 0, 0, 0);
            if (unregistered) fprintf(stderr, "the application unregistered before every call was answered\n");
            dbus_connection_flush(connection);
            return 0;
        }
        double now = bench_now();
        if (finished && now - finished_at > 10) break;
        if (!finished && now - began > 120) bench_die("nobody subscribed or registered within 120 s", NULL);
    }
    return 0;
}
