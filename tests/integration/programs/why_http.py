"""Target: a thread pool whose workers are stuck in HTTP requests (urllib,
no timeout) to a local server that accepts connections but never answers.
The server runs in this process, on 127.0.0.1 only.

usage: python why_http.py REPORT.json
"""

import concurrent.futures
import socket
import sys
import threading
import urllib.request

sys.dont_write_bytecode = True
import _target  # noqa: E402

WORKERS = 4


def silent_server(listener, accepted):
    """Accept every connection, keep it open, never send a byte."""
    while True:
        conn, peer = listener.accept()
        accepted.append(conn)


def fetch(url):
    with urllib.request.urlopen(url) as response:  # no timeout
        return response.read()


def worker_sockets():
    """For each pool worker, the socket its stuck urlopen reads from, found
    in its own frames (SocketIO.readinto's self._sock)."""
    found = {}
    frames = sys._current_frames()
    for thread in threading.enumerate():
        frame = frames.get(thread.ident)
        while frame is not None:
            if frame.f_code.co_name == "readinto" and "self" in frame.f_locals:
                sock = getattr(frame.f_locals["self"], "_sock", None)
                if isinstance(sock, socket.socket):
                    local = sock.getsockname()
                    found[thread.name] = {"object": id(sock), "fd": sock.fileno(),
                                          "local": "%s:%d" % local[:2],
                                          "function": _target.function_name(frame.f_code)}
                    break
            frame = frame.f_back
    del frames
    return found


def main():
    path = _target.report_path()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted = []
    threading.Thread(target=silent_server, args=(listener, accepted), name="server",
                     daemon=True).start()
    server = "%s:%d" % listener.getsockname()[:2]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="fetch")
    for _ in range(WORKERS):
        pool.submit(fetch, "http://%s/" % server)
    _target.wait_settled()
    sockets = worker_sockets()
    _target.park(__file__, path, extra={"server": server, "workers": sockets})


if __name__ == "__main__":
    main()
