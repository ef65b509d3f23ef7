#ifndef ABLE_CLINUX_SHIM_H
#define ABLE_CLINUX_SHIM_H

// Linux and glibc headers that Swift's Glibc module map leaves out.

// The event loops (AbleStreams' EventLoop) wait in epoll_wait and are woken through an eventfd.
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

// Names the calling thread (at most 15 bytes show); prctl is variadic, which Swift does not import.
static inline int able_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

#endif
