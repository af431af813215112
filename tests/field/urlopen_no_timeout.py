"""urllib.request.urlopen() without a timeout, against a server that accepts
the connection and never answers.

Source: the urllib.request documentation ("timeout ... if not specified,
the global default timeout setting will be used", which is None: block
forever), the requests documentation ("Nearly all production code should
use this parameter ... your program can hang indefinitely"), and requests
issue #3070.

The "server" is a listening socket nobody accepts from: the kernel
completes the handshake and queues the request.

Senior engineer: network_wait, probable: the fetch thread waits with no
timeout for a reply on a TCP connection it opened; an answer from outside
could still come, so it is not certain.
"""

import socket
import threading
import urllib.request

import _field


def fetch(url, connected):
    connected.set()
    urllib.request.urlopen(url).read()


def main():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    url = "http://127.0.0.1:%d/report" % server.getsockname()[1]
    connected = threading.Event()
    t = threading.Thread(target=fetch, args=(url, connected), name="fetch")
    t.start()
    connected.wait()
    _field.report_later(_field.expect("network_wait", "probable", threads=["fetch"],
                                      blocked=["MainThread"]),
                        extra={"server": "127.0.0.1:%d" % server.getsockname()[1]})
    t.join()


if __name__ == "__main__":
    main()
