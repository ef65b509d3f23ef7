/* Reference for dbus-signal-propertieschanged: receives N PropertiesChanged signals from
 * signal-emitter, decodes each one's Value and checks the sequence numbers for loss and reordering.
 * Prints READY once its match rule is installed; gives up after 5 s without a signal.
 *
 * Reference for central-notifications when given `notify`: subscribes as a BlueZ client does (a
 * match rule on org.bluez's PropertiesChanged of the characteristic, arg0 its interface), calls
 * GattCharacteristic1.StartNotify on the fake BlueZ (which then emits), and StopNotify at the end.
 * usage: signal-receiver ADDRESS N [notify] */
#include "bench-common.h"

static long expected, received, lost, reordered;

/* Decodes one PropertiesChanged(s interface, a{sv} changed, as invalidated); returns 0 if malformed. */
static int decode(DBusMessage *message, uint64_t *sequence) {
    DBusMessageIter iter, changed, entry, variant, array, invalidated;
    const char *interface = NULL, *key = NULL;
    const unsigned char *bytes = NULL;
    int length = 0, found = 0;
    if (strcmp(dbus_message_get_path(message), BENCH_SIGNAL_PATH) != 0) return 0;
    if (!dbus_message_iter_init(message, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_STRING) return 0;
    dbus_message_iter_get_basic(&iter, &interface);
    if (strcmp(interface, BENCH_GATT_INTERFACE) != 0) return 0;
    if (!dbus_message_iter_next(&iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_ARRAY ||
        dbus_message_iter_get_element_type(&iter) != DBUS_TYPE_DICT_ENTRY)
        return 0;
    dbus_message_iter_recurse(&iter, &changed);
    while (dbus_message_iter_get_arg_type(&changed) == DBUS_TYPE_DICT_ENTRY) {
        dbus_message_iter_recurse(&changed, &entry);
        if (dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_STRING) return 0;
        dbus_message_iter_get_basic(&entry, &key);
        dbus_message_iter_next(&entry);
        if (dbus_message_iter_get_arg_type(&entry) != DBUS_TYPE_VARIANT) return 0;
        if (strcmp(key, "Value") == 0) {
            dbus_message_iter_recurse(&entry, &variant);
            if (dbus_message_iter_get_arg_type(&variant) != DBUS_TYPE_ARRAY ||
                dbus_message_iter_get_element_type(&variant) != DBUS_TYPE_BYTE)
                return 0;
            dbus_message_iter_recurse(&variant, &array);
            dbus_message_iter_get_fixed_array(&array, &bytes, &length);
            found = 1;
        }
        dbus_message_iter_next(&changed);
    }
    if (!dbus_message_iter_next(&iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_ARRAY) return 0;
    dbus_message_iter_recurse(&iter, &invalidated);
    while (dbus_message_iter_get_arg_type(&invalidated) == DBUS_TYPE_STRING) dbus_message_iter_next(&invalidated);
    if (!found || length != BENCH_VALUE_LENGTH) return 0;
    *sequence = bench_sequence(bytes);
    return 1;
}

int main(int argc, char **argv) {
    int notify = argc == 4 && strcmp(argv[3], "notify") == 0;
    if (argc != 3 && !notify) {
        fprintf(stderr, "usage: signal-receiver ADDRESS N [notify]\n");
        return 2;
    }
    long n = atol(argv[2]);
    DBusConnection *connection = bench_connect(argv[1]);
    DBusError error;
    dbus_error_init(&error);
    dbus_bus_add_match(connection,
                       notify ? "type='signal',sender='" BLUEZ_NAME "',path='" BLUEZ_CHARACTERISTIC_PATH
                                "',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged',"
                                "arg0='" BENCH_GATT_INTERFACE "'"
                              : "type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'",
                       &error);
    if (dbus_error_is_set(&error)) bench_die("AddMatch", &error);
    bench_mark start = bench_mark_now();
    printf("READY\n");
    fflush(stdout);
    if (notify) {
        DBusMessage *call = dbus_message_new_method_call(BLUEZ_NAME, BLUEZ_CHARACTERISTIC_PATH, BENCH_GATT_INTERFACE,
                                                         "StartNotify");
        DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, 25000, &error);
        dbus_message_unref(call);
        if (reply == NULL) bench_die("StartNotify", &error);
        dbus_message_unref(reply);
    }

    /* The figure counts from the moment the first signal was taken (first) to the last; active is
     * when a signal last came, for giving up. */
    bench_mark first = start;
    double active = bench_now();
    long seen = 0;
    while (expected < n) {
        if (!dbus_connection_read_write(connection, 1000)) bench_die("disconnected", NULL);
        DBusMessage *message;
        while ((message = dbus_connection_pop_message(connection)) != NULL) {
            uint64_t sequence;
            if (dbus_message_is_signal(message, DBUS_INTERFACE_PROPERTIES, "PropertiesChanged")) {
                if (!decode(message, &sequence)) bench_die("malformed PropertiesChanged", NULL);
                if (received++ == 0) first = bench_mark_now();
                if (sequence == (uint64_t)expected) {
                    expected++;
                } else if (sequence > (uint64_t)expected) {
                    lost += (long)(sequence - (uint64_t)expected);
                    expected = (long)sequence + 1;
                } else {
                    reordered++;
                }
            }
            dbus_message_unref(message);
        }
        double now = bench_now();
        if (received != seen) {
            seen = received;
            active = now;
        } else if (now - active > (received ? 5.0 : 30.0)) {
            break;
        }
    }
    bench_mark end = bench_mark_now();
    lost += n - expected;
    bench_report_span(received, start, first, end, lost, reordered, 0);
    if (notify) {
        DBusMessage *call = dbus_message_new_method_call(BLUEZ_NAME, BLUEZ_CHARACTERISTIC_PATH, BENCH_GATT_INTERFACE,
                                                         "StopNotify");
        DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, 5000, NULL);
        dbus_message_unref(call);
        if (reply != NULL) dbus_message_unref(reply);
    }
    return 0;
}
