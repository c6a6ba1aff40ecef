#!/usr/bin/python3
"""A freedesktop notification server on the session bus it is given, which records every notification it is sent.

Owns org.freedesktop.Notifications at /org/freedesktop/Notifications (the interface desktops implement: Notify,
CloseNotification, GetCapabilities, GetServerInformation) and appends each Notify call as one JSON line to RECORD
(app name, summary, body, hints' keys, timeout). Prints "ready" once it owns the name. Stops on SIGTERM.

Usage: notification_server.py RECORD   (with DBUS_SESSION_BUS_ADDRESS set)
"""

import json
import signal
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

NAME = "org.freedesktop.Notifications"


class Server(dbus.service.Object):
    def __init__(self, bus, record):
        super().__init__(bus, "/org/freedesktop/Notifications")
        self.record = record
        self.next_id = 1

    @dbus.service.method(NAME, in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout):
        with open(self.record, "a") as out:
            out.write(json.dumps({
                "app": str(app), "summary": str(summary), "body": str(body), "icon": str(icon),
                "hints": sorted(str(k) for k in hints.keys()), "timeout": int(timeout),
            }) + "\n")
        self.next_id += 1
        return dbus.UInt32(self.next_id - 1)

    @dbus.service.method(NAME, in_signature="u", out_signature="")
    def CloseNotification(self, identifier):
        pass

    @dbus.service.method(NAME, in_signature="", out_signature="as")
    def GetCapabilities(self):
        return ["body"]

    @dbus.service.method(NAME, in_signature="", out_signature="ssss")
    def GetServerInformation(self):
        return ("share-test-notifications", "share", "1", "1.2")


def main():
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    owned = dbus.service.BusName(NAME, bus, do_not_queue=True)
    Server(bus, sys.argv[1])
    loop = GLib.MainLoop()
    signal.signal(signal.SIGTERM, lambda *_: loop.quit())
    print("ready", flush=True)
    loop.run()
    del owned


if __name__ == "__main__":
    main()
