/* Reference for central-notify-socket and central-write-socket: what a C client of the fake BlueZ
 * (fake-bluez.c in notify-socket or write-socket mode) does with a characteristic's socket through
 * libdbus alone.
 *
 *   socket-client ADDRESS notify N
 *     Calls GattCharacteristic1.AcquireNotify, then reads N values of 20 bytes from the socket
 *     with poll(2) and read(2), one at a time, checking their sequence numbers (the first 8 bytes,
 *     little-endian); gives up after 30 s without a value.
 *   socket-client ADDRESS write N
 *     Calls AcquireWrite, then writes N values of 20 bytes, each carrying its sequence number, with
 *     blocking write(2), and waits until the fake has read them all before closing the socket.
 *
 * Prints the result line of bench-common.h; the CPU counts from just before the Acquire call. */
#include "bench-common.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int acquire(DBusConnection *connection, const char *method) {
    DBusMessage *call = dbus_message_new_method_call(BLUEZ_NAME, BLUEZ_CHARACTERISTIC_PATH, BENCH_GATT_INTERFACE, method);
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
    dbus_uint16_t mtu = 0;
    if (!dbus_message_get_args(reply, &error, DBUS_TYPE_UNIX_FD, &fd, DBUS_TYPE_UINT16, &mtu, DBUS_TYPE_INVALID))
        bench_die(method, &error);
    dbus_message_unref(reply);
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[2], "notify") != 0 && strcmp(argv[2], "write") != 0)) {
        fprintf(stderr, "usage: socket-client ADDRESS notify|write N\n");
        return 2;
    }
    int notify = strcmp(argv[2], "notify") == 0;
    long count = atol(argv[3]);
    DBusConnection *connection = bench_connect(argv[1]);
    bench_mark start = bench_mark_now();
    int fd = acquire(connection, notify ? "AcquireNotify" : "AcquireWrite");
    long lost = 0, reordered = 0;
    if (notify) {
        uint64_t expected = 0;
        for (long received = 0; received < count;) {
            struct pollfd ready = {.fd = fd, .events = POLLIN};
            if (poll(&ready, 1, 30000) != 1) {
                fprintf(stderr, "no value for 30 s after %ld of %ld\n", received, count);
                return 1;
            }
            unsigned char value[600];
            ssize_t length = read(fd, value, sizeof value);
            if (length < 0 && errno == EINTR) continue;
            if (length != BENCH_VALUE_LENGTH) bench_die("a notification is not 20 bytes", NULL);
            uint64_t sequence = bench_sequence(value);
            if (sequence >= expected) {
                lost += (long)(sequence - expected);
                expected = sequence + 1;
            } else {
                reordered++;
                lost--;
            }
            received++;
        }
    } else {
        unsigned char value[BENCH_VALUE_LENGTH];
        for (int b = 8; b < BENCH_VALUE_LENGTH; b++) value[b] = (unsigned char)b;
        for (long index = 0; index < count; index++) {
            for (int b = 0; b < 8; b++) value[b] = (unsigned char)((uint64_t)index >> (8 * b));
            ssize_t written;
            do written = write(fd, value, sizeof value);
            while (written < 0 && errno == EINTR);
            if (written != (ssize_t)sizeof value) {
                perror("write");
                return 1;
            }
        }
    }
    bench_mark end = bench_mark_now();
    if (!notify) {
        for (int waited = 0; waited < 60000; waited++) {
            int unread = 0;
            if (ioctl(fd, SIOCOUTQ, &unread) != 0 || unread == 0) break;
            usleep(1000);
        }
    }
    close(fd);
    bench_report(count, end.wall - start.wall, start, end, lost, reordered, 0);
    dbus_connection_close(connection);
    return 0;
}
