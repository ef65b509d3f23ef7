/*
 * The reference for `AbleBenchmarks l2cap`: moves COUNT SDUs of SIZE bytes from one end of an
 * AF_UNIX SOCK_SEQPACKET socketpair to the other (the kind of socket Able's simulator gives an
 * L2CAPChannel), with a blocking sender thread and a blocking receiver, and prints the result line
 * that Scripts/bench reads. Each SDU carries a sequence number in its first 8 bytes (or as many as
 * fit), which the receiver checks.
 *
 *   l2cap-socketpair SIZE COUNT [WARMUP]
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The SO_SNDBUF that Able's L2CAPChannel.makePair asks for. */
#define SOCKET_BUFFER (256 * 1024)

static long size, total;
static int sender_socket;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void cpu(double *user, double *system) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    *user = (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6;
    *system = (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
}

static void put_sequence(unsigned char *packet, uint64_t sequence) {
    for (long i = 0; i < 8 && i < size; i++) packet[i] = (unsigned char)(sequence >> (8 * i));
}

static uint64_t get_sequence(const unsigned char *packet, long length) {
    uint64_t value = 0;
    for (long i = (length < 8 ? length : 8) - 1; i >= 0; i--) value = (value << 8) | packet[i];
    return value;
}

static void *send_all(void *unused) {
    (void)unused;
    unsigned char *packet = malloc(size);
    memset(packet, 0x5A, size);
    for (long sequence = 0; sequence < total; sequence++) {
        put_sequence(packet, (uint64_t)sequence);
        ssize_t sent;
        do {
            sent = send(sender_socket, packet, size, MSG_NOSIGNAL);
        } while (sent < 0 && errno == EINTR);
        if (sent != size) {
            perror("send");
            exit(1);
        }
    }
    free(packet);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: l2cap-socketpair SIZE COUNT [WARMUP]\n");
        return 2;
    }
    size = atol(argv[1]);
    long count = atol(argv[2]);
    long warmup = argc > 3 ? atol(argv[3]) : 1000;
    total = count + warmup;
    if (size < 1 || size > 65535 || count < 1 || warmup < 0) {
        fprintf(stderr, "l2cap-socketpair: SIZE must be 1 to 65535, COUNT at least 1\n");
        return 2;
    }

    int sockets[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sockets) != 0) {
        perror("socketpair");
        return 1;
    }
    int buffer = SOCKET_BUFFER;
    for (int i = 0; i < 2; i++) setsockopt(sockets[i], SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
    sender_socket = sockets[0];

    pthread_t sender;
    pthread_create(&sender, NULL, send_all, NULL);

    /* The receive buffer is as large as the MTU, as an L2CAPChannel's is. */
    unsigned char *packet = malloc(65536);
    long received = 0, lost = 0, reordered = 0;
    uint64_t expected = 0;
    double first = 0, start_user = 0, start_system = 0;
    if (warmup == 0) {
        cpu(&start_user, &start_system);
        first = now();
    }
    while (received < total) {
        ssize_t length = recv(sockets[1], packet, 65536, 0);
        if (length < 0 && errno == EINTR) continue;
        if (length <= 0) {
            perror("recv");
            return 1;
        }
        if (length != size) {
            fprintf(stderr, "l2cap-socketpair: received %zd bytes, expected %ld\n", length, size);
            return 1;
        }
        uint64_t sequence = get_sequence(packet, length);
        if (size >= 8) {
            if (sequence > expected) lost += (long)(sequence - expected);
            if (sequence < expected) reordered++;
            else expected = sequence + 1;
        }
        received++;
        if (received == warmup) {
            cpu(&start_user, &start_system);
            first = now();
        }
    }
    double last = now();
    double end_user, end_system;
    cpu(&end_user, &end_system);
    pthread_join(sender, NULL);
    printf("result ops=%ld wall=%.6f user=%.6f sys=%.6f lost=%ld reordered=%ld dropped=0\n", count, last - first,
           end_user - start_user, end_system - start_system, lost, reordered);
    fflush(stdout);
    free(packet);
    return 0;
}
