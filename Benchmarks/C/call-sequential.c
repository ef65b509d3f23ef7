/* Reference for dbus-call-sequential: N Echo calls, one at a time, each reply decoded and checked.
 * usage: call-sequential ADDRESS N WARMUP */
#include "bench-common.h"

static void echo(DBusConnection *connection, dbus_uint64_t value) {
    DBusMessage *call = dbus_message_new_method_call(BENCH_NAME, BENCH_PATH, BENCH_INTERFACE, "Echo");
    dbus_message_append_args(call, DBUS_TYPE_UINT64, &value, DBUS_TYPE_INVALID);
    DBusError error;
    dbus_error_init(&error);
    DBusMessage *reply = dbus_connection_send_with_reply_and_block(connection, call, 25000, &error);
    dbus_message_unref(call);
    if (reply == NULL) bench_die("Echo", &error);
    dbus_uint64_t echoed = 0;
    DBusMessageIter iter;
    if (!dbus_message_iter_init(reply, &iter) || dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_UINT64)
        bench_die("Echo reply", NULL);
    dbus_message_iter_get_basic(&iter, &echoed);
    if (echoed != value) bench_die("Echo reply value", NULL);
    dbus_message_unref(reply);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: call-sequential ADDRESS N WARMUP\n");
        return 2;
    }
    long n = atol(argv[2]), warmup = atol(argv[3]);
    DBusConnection *connection = bench_connect(argv[1]);
    for (long i = 0; i < warmup; i++) echo(connection, (dbus_uint64_t)i);
    bench_mark start = bench_mark_now();
    for (long i = 0; i < n; i++) echo(connection, (dbus_uint64_t)i);
    bench_mark end = bench_mark_now();
    bench_report(n, end.wall - start.wall, start, end, 0, 0, 0);
    return 0;
}
