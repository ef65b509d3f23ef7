#ifndef ABLE_CDBUS_SHIM_H
#define ABLE_CDBUS_SHIM_H

#include <dbus/dbus.h>

// AbleDBus's event loop waits in epoll_wait and is woken through an eventfd; Glibc's module
// map leaves both headers out.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

// Names the calling thread (at most 15 bytes show); prctl is variadic, which Swift does not import.
static inline int able_name_this_thread(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

// libdbus's type codes are cast macros, which Swift does not import: re-export them.
static const int ABLE_DBUS_TYPE_INVALID = DBUS_TYPE_INVALID;
static const int ABLE_DBUS_TYPE_BYTE = DBUS_TYPE_BYTE;
static const int ABLE_DBUS_TYPE_BOOLEAN = DBUS_TYPE_BOOLEAN;
static const int ABLE_DBUS_TYPE_INT16 = DBUS_TYPE_INT16;
static const int ABLE_DBUS_TYPE_UINT16 = DBUS_TYPE_UINT16;
static const int ABLE_DBUS_TYPE_INT32 = DBUS_TYPE_INT32;
static const int ABLE_DBUS_TYPE_UINT32 = DBUS_TYPE_UINT32;
static const int ABLE_DBUS_TYPE_INT64 = DBUS_TYPE_INT64;
static const int ABLE_DBUS_TYPE_UINT64 = DBUS_TYPE_UINT64;
static const int ABLE_DBUS_TYPE_DOUBLE = DBUS_TYPE_DOUBLE;
static const int ABLE_DBUS_TYPE_STRING = DBUS_TYPE_STRING;
static const int ABLE_DBUS_TYPE_OBJECT_PATH = DBUS_TYPE_OBJECT_PATH;
static const int ABLE_DBUS_TYPE_SIGNATURE = DBUS_TYPE_SIGNATURE;
static const int ABLE_DBUS_TYPE_UNIX_FD = DBUS_TYPE_UNIX_FD;
static const int ABLE_DBUS_TYPE_ARRAY = DBUS_TYPE_ARRAY;
static const int ABLE_DBUS_TYPE_VARIANT = DBUS_TYPE_VARIANT;
static const int ABLE_DBUS_TYPE_STRUCT = DBUS_TYPE_STRUCT;
static const int ABLE_DBUS_TYPE_DICT_ENTRY = DBUS_TYPE_DICT_ENTRY;

static const int ABLE_DBUS_MESSAGE_TYPE_METHOD_CALL = DBUS_MESSAGE_TYPE_METHOD_CALL;
static const int ABLE_DBUS_MESSAGE_TYPE_ERROR = DBUS_MESSAGE_TYPE_ERROR;
static const int ABLE_DBUS_MESSAGE_TYPE_SIGNAL = DBUS_MESSAGE_TYPE_SIGNAL;

static const int ABLE_DBUS_TIMEOUT_INFINITE = DBUS_TIMEOUT_INFINITE;

#endif
