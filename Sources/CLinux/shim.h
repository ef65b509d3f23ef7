#ifndef ABLE_CLINUX_SHIM_H
#define ABLE_CLINUX_SHIM_H

// Linux and glibc headers that Swift's Glibc module map leaves out.

// The event loops (AbleStreams' EventLoop) wait in epoll_wait and are woken through an eventfd.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
// glibc's malloc statistics (mallinfo2), which the soak prints as the heap in use.
#include <malloc.h>

// Names the calling thread (at most 15 bytes show); prctl is variadic, which Swift does not import.
static inline int able_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

#endif
