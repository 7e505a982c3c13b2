#!/usr/bin/python3
"""A local SMTP server for the tests: aiosmtpd (Debian's python3-aiosmtpd) on 127.0.0.1:PORT, writing each message it
accepts to DIR/<n>.eml (the envelope's sender and recipients first, as X-Envelope-* lines). Prints "listening PORT"
once it accepts connections, and runs until killed."""
import os
import sys
import time

from aiosmtpd.controller import Controller


class Sink:
    def __init__(self, directory):
        self.directory = directory
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        path = os.path.join(self.directory, "%d.eml" % self.count)
        with open(path + ".part", "wb") as out:
            out.write(("X-Envelope-From: %s\n" % envelope.mail_from).encode())
            out.write(("X-Envelope-To: %s\n" % ", ".join(envelope.rcpt_tos)).encode())
            out.write(envelope.content if isinstance(envelope.content, bytes) else envelope.content.encode())
        os.rename(path + ".part", path)
        return "250 Message accepted"


def main():
    port = int(sys.argv[1])
    directory = sys.argv[2]
    os.makedirs(directory, exist_ok=True)
    controller = Controller(Sink(directory), hostname="127.0.0.1", port=port)
    controller.start()
    print("listening %d" % port, flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        controller.stop()


if __name__ == "__main__":
    main()
