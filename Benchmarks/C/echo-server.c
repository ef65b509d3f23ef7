/* The peer of the method-call figures: owns org.example.Bench and answers
 * org.example.Bench.Echo(t) with its argument, until it is killed. */
#include "bench-common.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: echo-server ADDRESS\n");
        return 2;
    }
    DBusConnection *connection = bench_connect(argv[1]);
    DBusError error;
    dbus_error_init(&error);
    int owned = dbus_bus_request_name(connection, BENCH_NAME, DBUS_NAME_FLAG_DO_NOT_QUEUE, &error);
    if (owned != DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER) bench_die("request name", &error);
    printf("READY\n");
    fflush(stdout);

    while (dbus_connection_read_write(connection, -1)) {
        DBusMessage *message;
        while ((message = dbus_connection_pop_message(connection)) != NULL) {
            if (dbus_message_is_method_call(message, BENCH_INTERFACE, "Echo")) {
                DBusMessage *reply;
                dbus_uint64_t value = 0;
                DBusMessageIter iter;
                if (dbus_message_iter_init(message, &iter) &&
                    dbus_message_iter_get_arg_type(&iter) == DBUS_TYPE_UINT64) {
                    dbus_message_iter_get_basic(&iter, &value);
                    reply = dbus_message_new_method_return(message);
                    dbus_message_append_args(reply, DBUS_TYPE_UINT64, &value, DBUS_TYPE_INVALID);
                } else {
                    reply = dbus_message_new_error(message, DBUS_ERROR_INVALID_ARGS, "Echo takes one uint64");
                }
                dbus_connection_send(connection, reply, NULL);
                dbus_message_unref(reply);
            } else if (dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_METHOD_CALL &&
                       !dbus_message_get_no_reply(message)) {
                DBusMessage *reply = dbus_message_new_error(message, DBUS_ERROR_UNKNOWN_METHOD, "unknown method");
                dbus_connection_send(connection, reply, NULL);
                dbus_message_unref(reply);
            }
            dbus_message_unref(message);
        }
    }
    return 0;
}
