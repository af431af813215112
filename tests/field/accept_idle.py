"""A server thread waiting in socket.accept() with no timeout: the healthy
state of every idle server, and a frequent false alarm of hang detectors.

Source: the socket documentation (accept() blocks until a connection
arrives; socket.setdefaulttimeout), and the py-spy FAQ entry on idle
servers looking stuck in accept.

Senior engineer: idle: the server waits for clients from outside the
process, the main thread joins it; nothing is stuck.
"""

import socket
import threading

import _field


def serve(sock):
    while True:
        conn, _ = sock.accept()
        conn.close()


def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    t = threading.Thread(target=serve, args=(sock,), name="server")
    t.start()
    _field.report_later(_field.expect("idle", None))
    t.join()


if __name__ == "__main__":
    main()
