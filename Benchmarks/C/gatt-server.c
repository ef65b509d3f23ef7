/* Reference for server-readvalue: a GATT application written against libdbus. It exports, under an
 * ObjectManager at its root, one primary service and one readable characteristic, registers it with
 * org.bluez.GattManager1.RegisterApplication on /org/bluez/hci0 (answering the GetManagedObjects
 * that BlueZ calls back meanwhile), and answers ReadValue(a{sv}) with 20 bytes, accepting calls
 * only from the unique name owning org.bluez, as a GATT application must.
 *
 * Counts the ReadValue calls it answers: after WARMUP it starts measuring, after WARMUP + N it
 * prints the result line (its own CPU time over the N calls), unregisters and exits.
 * usage: gatt-server ADDRESS N WARMUP */
#include "bench-common.h"

#define APP_ROOT "/org/example/gatt"
#define APP_SERVICE APP_ROOT "/service0"
#define APP_CHARACTERISTIC APP_SERVICE "/char0"

static DBusConnection *connection;
static char *bluez;
static long answered, warmup, total;
static bench_mark start, end;
static int done;
static unsigned char value[BENCH_VALUE_LENGTH];

static void service_properties(DBusMessageIter *dict) {
    bench_entry_string(dict, "UUID", BLUEZ_SERVICE_UUID);
    bench_entry_bool(dict, "Primary", 1);
}

static void characteristic_properties(DBusMessageIter *dict) {
    bench_entry_string(dict, "UUID", BLUEZ_CHARACTERISTIC_UUID);
    bench_entry_path(dict, "Service", APP_SERVICE);
    const char *flags[] = {"read"};
    bench_entry_strings(dict, "Flags", flags, 1);
    bench_entry_bytes(dict, "Value", value, 0);
    bench_entry_bool(dict, "Notifying", 0);
}

static void append_object(DBusMessageIter *objects, const char *path, const char *interface,
                          void (*properties)(DBusMessageIter *)) {
    DBusMessageIter object, interfaces, entry, dict;
    dbus_message_iter_open_container(objects, DBUS_TYPE_DICT_ENTRY, NULL, &object);
    dbus_message_iter_append_basic(&object, DBUS_TYPE_OBJECT_PATH, &path);
    dbus_message_iter_open_container(&object, DBUS_TYPE_ARRAY, "{sa{sv}}", &interfaces);
    dbus_message_iter_open_container(&interfaces, DBUS_TYPE_DICT_ENTRY, NULL, &entry);
    dbus_message_iter_append_basic(&entry, DBUS_TYPE_STRING, &interface);
    dbus_message_iter_open_container(&entry, DBUS_TYPE_ARRAY, "{sv}", &dict);
    properties(&dict);
    dbus_message_iter_close_container(&entry, &dict);
    dbus_message_iter_close_container(&interfaces, &entry);
    dbus_message_iter_close_container(&object, &interfaces);
    dbus_message_iter_close_container(objects, &object);
}

static void get_managed_objects(DBusMessage *call) {
    DBusMessage *reply = dbus_message_new_method_return(call);
    DBusMessageIter iter, objects;
    dbus_message_iter_init_append(reply, &iter);
    dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{oa{sa{sv}}}", &objects);
    append_object(&objects, APP_SERVICE, "org.bluez.GattService1", service_properties);
    append_object(&objects, APP_CHARACTERISTIC, BENCH_GATT_INTERFACE, characteristic_properties);
    dbus_message_iter_close_container(&iter, &objects);
    dbus_connection_send(connection, reply, NULL);
    dbus_message_unref(reply);
}

/* ReadValue(a{sv} options) -> ay: reads the options as an application must (offset), answers 20 bytes. */
static void read_value(DBusMessage *call) {
    DBusMessageIter iter;
    dbus_uint16_t offset = 0;
    if (!dbus_message_iter_init(call, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_ARRAY ||
        dbus_message_iter_get_element_type(&iter) != DBUS_TYPE_DICT_ENTRY) {
        bench_reply_error(connection, call, DBUS_ERROR_INVALID_ARGS, "ReadValue takes a{sv}");
        return;
    }
    bench_option(&iter, "offset", DBUS_TYPE_UINT16, &offset);
    if (offset > BENCH_VALUE_LENGTH) {
        bench_reply_error(connection, call, "org.bluez.Error.InvalidOffset", "Invalid offset");
        return;
    }
    DBusMessage *reply = dbus_message_new_method_return(call);
    const unsigned char *bytes = value + offset;
    DBusMessageIter out, array;
    dbus_message_iter_init_append(reply, &out);
    dbus_message_iter_open_container(&out, DBUS_TYPE_ARRAY, "y", &array);
    dbus_message_iter_append_fixed_array(&array, DBUS_TYPE_BYTE, &bytes, BENCH_VALUE_LENGTH - offset);
    dbus_message_iter_close_container(&out, &array);
    dbus_connection_send(connection, reply, NULL);
    dbus_message_unref(reply);

    answered++;
    if (answered == warmup) start = bench_mark_now();
    if (answered == total) {
        end = bench_mark_now();
        done = 1;
    }
}

static DBusHandlerResult filter(DBusConnection *unused, DBusMessage *message, void *data) {
    (void)unused;
    (void)data;
    if (dbus_message_get_type(message) != DBUS_MESSAGE_TYPE_METHOD_CALL) return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    const char *path = dbus_message_get_path(message);
    if (strncmp(path, APP_ROOT, strlen(APP_ROOT)) != 0) return DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
    if (strcmp(dbus_message_get_sender(message), bluez) != 0) {
        bench_reply_error(connection, message, DBUS_ERROR_ACCESS_DENIED, "only BlueZ may call a GATT application");
    } else if (dbus_message_is_method_call(message, DBUS_INTERFACE_OBJECT_MANAGER, "GetManagedObjects") &&
               strcmp(path, APP_ROOT) == 0) {
        get_managed_objects(message);
    } else if (dbus_message_is_method_call(message, BENCH_GATT_INTERFACE, "ReadValue") &&
               strcmp(path, APP_CHARACTERISTIC) == 0) {
        read_value(message);
    } else {
        bench_reply_error(connection, message, DBUS_ERROR_UNKNOWN_METHOD, "unknown method");
    }
    return DBUS_HANDLER_RESULT_HANDLED;
}

static DBusPendingCall *call_gatt_manager(const char *method) {
    DBusMessage *call = dbus_message_new_method_call(BLUEZ_NAME, BLUEZ_ADAPTER_PATH, "org.bluez.GattManager1", method);
    const char *root = APP_ROOT;
    DBusMessageIter iter, options;
    dbus_message_iter_init_append(call, &iter);
    dbus_message_iter_append_basic(&iter, DBUS_TYPE_OBJECT_PATH, &root);
    if (strcmp(method, "RegisterApplication") == 0) {
        dbus_message_iter_open_container(&iter, DBUS_TYPE_ARRAY, "{sv}", &options);
        dbus_message_iter_close_container(&iter, &options);
    }
    DBusPendingCall *pending = NULL;
    if (!dbus_connection_send_with_reply(connection, call, &pending, 25000) || pending == NULL)
        bench_die(method, NULL);
    dbus_message_unref(call);
    return pending;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: gatt-server ADDRESS N WARMUP\n");
        return 2;
    }
    long n = atol(argv[2]);
    warmup = atol(argv[3]);
    total = warmup + n;
    for (int i = 0; i < BENCH_VALUE_LENGTH; i++) value[i] = (unsigned char)i;
    connection = bench_connect(argv[1]);
    bluez = bench_name_owner(connection, BLUEZ_NAME);
    if (bluez == NULL) bench_die("org.bluez is not on the bus", NULL);
    dbus_connection_add_filter(connection, filter, NULL, NULL);
    if (warmup == 0) start = bench_mark_now();

    /* Register, answering BlueZ's GetManagedObjects while the call is pending. */
    DBusPendingCall *pending = call_gatt_manager("RegisterApplication");
    while (!dbus_pending_call_get_completed(pending)) {
        if (!dbus_connection_read_write_dispatch(connection, -1)) bench_die("disconnected", NULL);
    }
    DBusMessage *reply = dbus_pending_call_steal_reply(pending);
    dbus_pending_call_unref(pending);
    if (reply == NULL || dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_ERROR)
        bench_die("RegisterApplication failed", NULL);
    dbus_message_unref(reply);

    while (!done) {
        if (!dbus_connection_read_write_dispatch(connection, -1)) bench_die("disconnected", NULL);
    }
    bench_report(n, end.wall - start.wall, start, end, 0, 0, 0);

    pending = call_gatt_manager("UnregisterApplication");
    dbus_pending_call_block(pending);
    dbus_pending_call_unref(pending);
    return 0;
}
