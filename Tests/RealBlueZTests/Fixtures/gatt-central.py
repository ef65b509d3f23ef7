#!/usr/bin/python3
"""A GATT central that Able did not write, driven line by line by a test: python3-dbus on BlueZ.

Usage: gatt-central.py ADAPTER

Reads one JSON request per line on standard input and writes one JSON reply per line on
standard output: {"ok": true, ...} or {"ok": false, "error": D-Bus error name, "message": text}.
Values travel as hex strings. Requests ("op" and its fields):

  scan-start  uuid                        SetDiscoveryFilter(UUIDs, le) and StartDiscovery
  scan-find   uuid timeout                waits for a device advertising uuid, stops discovery;
                                          replies address, name, uuids
  connect     address timeout             Device1.Connect, then waits for ServicesResolved
  services                                the UUIDs of the connected device's services
  read        uuid [offset]               GattCharacteristic1.ReadValue; replies value
  write       uuid value [type]           WriteValue, type "request" (default) or "command"
  read-descriptor   characteristic uuid   GattDescriptor1.ReadValue; replies value
  write-descriptor  characteristic uuid value
  subscribe   uuid                        StartNotify; values are kept from the first one on
  take        uuid count timeout          the next count values received; replies values
  unsubscribe uuid                        StopNotify
  disconnect                              Device1.Disconnect
  call-exported name root paths           acts as a second process on the bus: calls
                                          GetManagedObjects on root, and ReadValue, WriteValue
                                          and Properties.Get on each of paths, of the
                                          connection name; replies each call's error
"""

import json
import sys
import time

import dbus
import dbus.mainloop.glib
from gi.repository import GLib

BLUEZ = "org.bluez"
DEVICE = "org.bluez.Device1"
CHARACTERISTIC = "org.bluez.GattCharacteristic1"
DESCRIPTOR = "org.bluez.GattDescriptor1"
PROPERTIES = "org.freedesktop.DBus.Properties"


class Failure(Exception):
    """A request that failed without a D-Bus error."""


class Central:
    def __init__(self, adapter_name):
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        self.bus = dbus.SystemBus()
        self.adapter_path = f"/org/bluez/{adapter_name}"
        self.adapter = dbus.Interface(self.bus.get_object(BLUEZ, self.adapter_path), "org.bluez.Adapter1")
        self.device_path = None
        self.received = {}  # characteristic path -> values not taken yet
        self.receivers = {}

    # Helpers

    def objects(self):
        manager = dbus.Interface(self.bus.get_object(BLUEZ, "/"), "org.freedesktop.DBus.ObjectManager")
        return manager.GetManagedObjects()

    def pump(self, until=None, timeout=0.0):
        """Runs the main loop's pending work, and until until() holds or timeout passes."""
        context = GLib.MainContext.default()
        deadline = time.monotonic() + timeout
        while True:
            while context.pending():
                context.iteration(False)
            if until is None or until() or time.monotonic() >= deadline:
                return
            context.iteration(False) or time.sleep(0.02)

    def device(self):
        if self.device_path is None:
            raise Failure("not connected")
        return self.bus.get_object(BLUEZ, self.device_path)

    def characteristic(self, uuid):
        uuid = uuid.lower()
        for path, interfaces in self.objects().items():
            properties = interfaces.get(CHARACTERISTIC)
            if properties and path.startswith(self.device_path + "/") and properties["UUID"] == uuid:
                return path
        raise Failure(f"no characteristic {uuid}")

    def descriptor(self, characteristic, uuid):
        parent = self.characteristic(characteristic)
        for path, interfaces in self.objects().items():
            properties = interfaces.get(DESCRIPTOR)
            if properties and properties["Characteristic"] == parent and properties["UUID"] == uuid.lower():
                return path
        raise Failure(f"no descriptor {uuid} of {characteristic}")

    # Requests

    def scan_start(self, uuid):
        self.adapter.SetDiscoveryFilter({"UUIDs": dbus.Array([uuid.lower()], signature="s"), "Transport": "le"})
        self.adapter.StartDiscovery()
        return {}

    def scan_find(self, uuid, timeout):
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                for path, interfaces in self.objects().items():
                    properties = interfaces.get(DEVICE)
                    if properties and path.startswith(self.adapter_path + "/") and uuid.lower() in properties.get("UUIDs", []):
                        return {"address": str(properties["Address"]), "name": str(properties.get("Name", "")),
                                "uuids": [str(u) for u in properties["UUIDs"]]}
                time.sleep(0.25)
            raise Failure(f"no device advertised {uuid} within {timeout} s")
        finally:
            self.adapter.StopDiscovery()

    def connect(self, address, timeout):
        self.device_path = f"{self.adapter_path}/dev_{address.replace(':', '_')}"
        device = self.device()
        device.Connect(dbus_interface=DEVICE, timeout=timeout)
        deadline = time.monotonic() + timeout
        while not device.Get(DEVICE, "ServicesResolved", dbus_interface=PROPERTIES):
            if time.monotonic() >= deadline:
                raise Failure("services not resolved in time")
            time.sleep(0.1)
        return {}

    def services(self):
        return {"uuids": sorted(str(interfaces["org.bluez.GattService1"]["UUID"])
                                for path, interfaces in self.objects().items()
                                if "org.bluez.GattService1" in interfaces and path.startswith(self.device_path + "/"))}

    def read(self, uuid, offset=0):
        options = {"offset": dbus.UInt16(offset)} if offset else {}
        value = self.bus.get_object(BLUEZ, self.characteristic(uuid)).ReadValue(options, dbus_interface=CHARACTERISTIC)
        return {"value": bytes(value).hex()}

    def write(self, uuid, value, type="request"):
        self.bus.get_object(BLUEZ, self.characteristic(uuid)).WriteValue(
            dbus.Array(bytes.fromhex(value), signature="y"), {"type": type}, dbus_interface=CHARACTERISTIC)
        return {}

    def read_descriptor(self, characteristic, uuid):
        value = self.bus.get_object(BLUEZ, self.descriptor(characteristic, uuid)).ReadValue(
            {}, dbus_interface=DESCRIPTOR)
        return {"value": bytes(value).hex()}

    def write_descriptor(self, characteristic, uuid, value):
        self.bus.get_object(BLUEZ, self.descriptor(characteristic, uuid)).WriteValue(
            dbus.Array(bytes.fromhex(value), signature="y"), {}, dbus_interface=DESCRIPTOR)
        return {}

    def subscribe(self, uuid):
        path = self.characteristic(uuid)
        self.received[path] = []

        def changed(interface, changed, invalidated, path=path):
            if interface == CHARACTERISTIC and "Value" in changed:
                self.received[path].append(bytes(changed["Value"]).hex())

        if path not in self.receivers:
            self.receivers[path] = self.bus.add_signal_receiver(
                changed, signal_name="PropertiesChanged", dbus_interface=PROPERTIES, bus_name=BLUEZ, path=path)
        self.bus.get_object(BLUEZ, path).StartNotify(dbus_interface=CHARACTERISTIC)
        return {}

    def take(self, uuid, count, timeout):
        values = self.received.setdefault(self.characteristic(uuid), [])
        self.pump(until=lambda: len(values) >= count, timeout=timeout)
        if len(values) < count:
            raise Failure(f"{len(values)} of {count} values within {timeout} s: {values}")
        taken = values[:count]
        del values[:count]
        return {"values": taken}

    def unsubscribe(self, uuid):
        self.bus.get_object(BLUEZ, self.characteristic(uuid)).StopNotify(dbus_interface=CHARACTERISTIC)
        return {}

    def disconnect(self):
        self.device().Disconnect(dbus_interface=DEVICE)
        return {}

    def call_exported(self, name, root, paths):
        """Calls the objects another process exported, as a process that is not bluetoothd.

        Only interfaces the system bus's policy lets any root process call are used (BlueZ's
        bluetooth.conf allows them), so that a refusal comes from the exporting process.
        """
        calls = []

        def attempt(path, interface, method, *arguments):
            try:
                getattr(self.bus.get_object(name, path, introspect=False), method)(
                    *arguments, dbus_interface=interface, timeout=10)
                calls.append({"path": path, "method": method, "error": None})
            except dbus.exceptions.DBusException as error:
                calls.append({"path": path, "method": method, "error": error.get_dbus_name(),
                              "message": error.get_dbus_message() or ""})

        no_options = dbus.Dictionary({}, signature="sv")
        attempt(root, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects")
        for path in paths:
            interface = DESCRIPTOR if path.rsplit("/", 1)[-1].startswith("desc") else CHARACTERISTIC
            attempt(path, interface, "ReadValue", no_options)
            attempt(path, interface, "WriteValue", dbus.Array(b"\xee", signature="y"), no_options)
            attempt(path, PROPERTIES, "Get", interface, "UUID")
        return {"calls": calls}


def main():
    central = Central(sys.argv[1])
    for line in sys.stdin:
        request = json.loads(line)
        operation = request.pop("op").replace("-", "_")
        try:
            reply = {"ok": True, **getattr(central, operation)(**request)}
        except dbus.exceptions.DBusException as error:
            reply = {"ok": False, "error": error.get_dbus_name(), "message": error.get_dbus_message() or ""}
        except Failure as error:
            reply = {"ok": False, "error": "failure", "message": str(error)}
        central.pump()
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
