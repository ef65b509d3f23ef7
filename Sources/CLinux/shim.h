#ifndef ABLE_CLINUX_SHIM_H
#define ABLE_CLINUX_SHIM_H

// Linux and glibc headers that Swift's Glibc module map leaves out.

// The event loops (AbleIO's EventLoop) wait in epoll_pwait and are woken through an eventfd.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
// glibc's malloc statistics (mallinfo2), which the soak prints as the heap in use.
#include <malloc.h>

// sendmmsg(2) and recvmmsg(2), which glibc declares only under _GNU_SOURCE (with `struct
// mmsghdr`): the L2CAP and characteristic sockets send a queue of packets, and receive the packets
// that are there, one message each, in one call.
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/// The kernel's `struct mmsghdr`: one message, and the bytes the kernel took of it.
struct able_mmsghdr {
    struct msghdr msg_hdr;
    unsigned int msg_len;
};

static inline int able_sendmmsg(int fd, struct able_mmsghdr *messages, unsigned int count, int flags) {
    return (int)syscall(SYS_sendmmsg, fd, messages, count, flags);
}

static inline int able_recvmmsg(int fd, struct able_mmsghdr *messages, unsigned int count, int flags) {
    return (int)syscall(SYS_recvmmsg, fd, messages, count, flags, (void *)0);
}

// The event loops' wait and the sockets' receive and send, as plain system calls. glibc's
// wrappers of these are cancellation points: around every call they switch the thread to
// asynchronous cancellation and back, two atomic updates of its state, about 30 instructions
// per call (of some 1,300 that a paced notification through a characteristic's socket costs
// Able's loop). Able cancels no thread (`pthread_cancel`), so these are the same calls without
// that; like the wrappers they return -1 and set errno on failure.
//
// The wait is epoll_pwait with no signal mask, which is epoll_wait: arm64 and riscv64 Linux have no
// epoll_wait system call (its number is not defined there), and epoll_pwait exists on every
// architecture. The last argument is the kernel's sigset size (_NSIG / 8: 8 bytes on x86_64, arm64
// and riscv64), not glibc's sizeof(sigset_t) of 128; with a null mask the kernel reads neither.
static inline int able_epoll_pwait(int epoll, struct epoll_event *events, int capacity, int timeout) {
    return (int)syscall(SYS_epoll_pwait, epoll, events, capacity, timeout, (void *)0, (size_t)8);
}

static inline ssize_t able_recv(int fd, void *buffer, size_t length, int flags) {
    return (ssize_t)syscall(SYS_recvfrom, fd, buffer, length, flags, (void *)0, (void *)0);
}

static inline ssize_t able_send(int fd, const void *bytes, size_t length, int flags) {
    return (ssize_t)syscall(SYS_sendto, fd, bytes, length, flags, (void *)0, 0);
}

// Names the calling thread (at most 15 bytes show); prctl is variadic, which Swift does not import.
static inline int able_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

#endif
