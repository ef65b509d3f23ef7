/* Reference for dbus-call-pipelined-64: N Echo calls with WINDOW in flight, each reply decoded and
 * checked, through libdbus pending calls and their notify functions.
 * usage: call-pipelined ADDRESS N WINDOW WARMUP */
#include "bench-common.h"

static DBusConnection *connection;
static long sent, completed, target;

static void send_one(void);

static void completed_one(DBusPendingCall *pending, void *data) {
    dbus_uint64_t expected = (dbus_uint64_t)(uintptr_t)data;
    DBusMessage *reply = dbus_pending_call_steal_reply(pending);
    dbus_pending_call_unref(pending);
    DBusMessageIter iter;
    dbus_uint64_t echoed = 0;
    if (reply == NULL || !dbus_message_iter_init(reply, &iter) ||
        dbus_message_iter_get_arg_type(&iter) != DBUS_TYPE_UINT64)
        bench_die("Echo reply", NULL);
    dbus_message_iter_get_basic(&iter, &echoed);
    if (echoed != expected) bench_die("Echo reply value", NULL);
    dbus_message_unref(reply);
    completed++;
    if (sent < target) send_one();
}

static void send_one(void) {
    dbus_uint64_t value = (dbus_uint64_t)sent;
    DBusMessage *call = dbus_message_new_method_call(BENCH_NAME, BENCH_PATH, BENCH_INTERFACE, "Echo");
    dbus_message_append_args(call, DBUS_TYPE_UINT64, &value, DBUS_TYPE_INVALID);
    DBusPendingCall *pending = NULL;
    if (!dbus_connection_send_with_reply(connection, call, &pending, 25000) || pending == NULL)
        bench_die("send Echo", NULL);
    dbus_message_unref(call);
    dbus_pending_call_set_notify(pending, completed_one, (void *)(uintptr_t)value, NULL);
    sent++;
}

static void run(long n, long window) {
    sent = completed = 0;
    target = n;
    while (sent < target && sent < window) send_one();
    while (completed < target) {
        if (!dbus_connection_read_write_dispatch(connection, -1)) bench_die("disconnected", NULL);
    }
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: call-pipelined ADDRESS N WINDOW WARMUP\n");
        return 2;
    }
    long n = atol(argv[2]), window = atol(argv[3]), warmup = atol(argv[4]);
    connection = bench_connect(argv[1]);
    run(warmup, window);
    bench_mark start = bench_mark_now();
    run(n, window);
    bench_mark end = bench_mark_now();
    bench_report(n, end.wall - start.wall, start, end, 0, 0, 0);
    return 0;
}
