#ifndef ABLE_CBLUETOOTH_SHIM_H
#define ABLE_CBLUETOOTH_SHIM_H

#include <sys/socket.h>
#include <bluetooth/bluetooth.h>
#include <bluetooth/l2cap.h>

// Socket constants that are macros in the kernel headers, re-exported for Swift.
static const int ABLE_AF_BLUETOOTH = AF_BLUETOOTH;
static const int ABLE_BTPROTO_L2CAP = BTPROTO_L2CAP;
static const int ABLE_SOL_BLUETOOTH = SOL_BLUETOOTH;
static const int ABLE_BT_SECURITY = BT_SECURITY;
static const int ABLE_BT_SECURITY_LOW = BT_SECURITY_LOW;
static const int ABLE_BT_SECURITY_MEDIUM = BT_SECURITY_MEDIUM;
static const int ABLE_BT_SECURITY_HIGH = BT_SECURITY_HIGH;
static const int ABLE_BT_SECURITY_FIPS = BT_SECURITY_FIPS;
static const int ABLE_BT_SNDMTU = BT_SNDMTU;
static const int ABLE_BT_RCVMTU = BT_RCVMTU;
static const int ABLE_BDADDR_LE_PUBLIC = BDADDR_LE_PUBLIC;
static const int ABLE_BDADDR_LE_RANDOM = BDADDR_LE_RANDOM;

#endif
