#!/usr/bin/python3
"""BlueZ's own example GATT server and advertisement, served on the adapter named on the command line.

Usage: bluez-example-peripheral.py ADAPTER ECHO-SERVICE-UUID ECHO-CHARACTERISTIC-UUID

The scripts `example-gatt-server` and `example-advertisement` of Debian's bluez-test-scripts
register on the first adapter that has the manager they need, which in Able's test guest is
hci0, the central. This fixture loads them as modules instead of running them, and registers
their `Application` and `TestAdvertisement` on ADAPTER in one main loop. It adds one small
service of its own for what the examples lack: a characteristic that stores what is written to
it, with or without response, and serves it back.

Standard output, line by line: "gatt registered" or "gatt failed: ERROR", "advertisement
registered" or "advertisement failed: ERROR", "echo write TYPE VALUE" per write to the echo
characteristic (TYPE as BlueZ gave it in the options, "(no type)" when it gave none), and whatever the examples print (their heart rate measurement prints
"Updating value: ..." each time it notifies). Runs until killed.
"""

import importlib.machinery
import importlib.util
import sys

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

EXAMPLES = "/usr/share/doc/bluez-test-scripts/examples"


def load_example(name):
    """Imports an example script (a file without .py) as a module; its main() does not run."""
    loader = importlib.machinery.SourceFileLoader(name.replace("-", "_"), f"{EXAMPLES}/{name}")
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


gatt = load_example("example-gatt-server")
advertising = load_example("example-advertisement")


class EchoCharacteristic(gatt.Characteristic):
    """Serves the last value written, by a write request or a write command."""

    def __init__(self, bus, index, uuid, service):
        gatt.Characteristic.__init__(self, bus, index, uuid, ["read", "write", "write-without-response"], service)
        self.value = [dbus.Byte(0)]

    def ReadValue(self, options):
        return self.value

    def WriteValue(self, value, options):
        print(f"echo write {options.get('type', '(no type)')} {bytes(value).hex()}", flush=True)
        self.value = value


def report(what):
    return (lambda: print(f"{what} registered", flush=True), lambda error: print(f"{what} failed: {error}", flush=True))


def main():
    adapter_name, echo_service, echo_characteristic = sys.argv[1:4]
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.SystemBus()
    adapter = bus.get_object("org.bluez", f"/org/bluez/{adapter_name}")

    application = gatt.Application(bus)
    service = gatt.Service(bus, len(application.services), echo_service, True)
    service.add_characteristic(EchoCharacteristic(bus, 0, echo_characteristic, service))
    application.add_service(service)
    advertisement = advertising.TestAdvertisement(bus, 0)

    # The examples print from GLib callbacks; their lines must reach the test as they happen.
    sys.stdout.reconfigure(line_buffering=True)
    registered, failed = report("gatt")
    dbus.Interface(adapter, "org.bluez.GattManager1").RegisterApplication(
        application.get_path(), {}, reply_handler=registered, error_handler=failed)
    registered, failed = report("advertisement")
    dbus.Interface(adapter, "org.bluez.LEAdvertisingManager1").RegisterAdvertisement(
        advertisement.get_path(), {}, reply_handler=registered, error_handler=failed)
    GLib.MainLoop().run()


if __name__ == "__main__":
    main()
