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
 * Prints the result line of bench-common.h. For write, the CPU counts from just before the Acquire call;
 * for notify, from the moment the first value was taken to the last (bench_report_span), with the
 * CPU from the Acquire call to the first value as `setup`. */
#include "bench-common.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[2], "notify") != 0 && strcmp(argv[2], "write") != 0)) {
        fprintf(stderr, "usage: socket-client ADDRESS notify|write N\n");
        return 2;
    }
    int notify = strcmp(argv[2], "notify") == 0;
    long count = atol(argv[3]);
    DBusConnection *connection = bench_connect(argv[1]);
    bench_mark start = bench_mark_now();
    uint16_t mtu = 0;
    int fd = bench_acquire(connection, BLUEZ_CHARACTERISTIC_PATH, notify ? "AcquireNotify" : "AcquireWrite", &mtu);
    long lost = 0, reordered = 0;
    /* A reader's figure counts from the moment it took the first value (first) to the last. */
    bench_mark first = start;
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
            bench_track_sequence(bench_sequence(value), &expected, &lost, &reordered);
            if (received++ == 0) first = bench_mark_now();
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
    if (notify)
        bench_report_span(count, start, first, end, lost, reordered, 0);
    else
        bench_report(count, end.wall - start.wall, start, end, lost, reordered, 0);
    dbus_connection_close(connection);
    return 0;
}
