"""Headless Chromium for the HTML report's tests and benchmark, stdlib only.

  find_chromium()        the browser binary, installing Debian's `chromium`
                         first when missing and running as root
  Browser(...)           a headless Chromium with a fresh profile and the
                         DevTools protocol on a local port
  Browser.page()         a CDP session (a small WebSocket client) to its tab:
                         navigate, evaluate, console errors and exceptions
  screenshot(...)        `chromium --headless --screenshot` of a page
  png_colors(path)       distinct colours in a PNG (a small decoder)
"""

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
import zlib
from pathlib import Path

# Headless, and nothing that could reach the network or slow the start.
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
]
NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium(install=True):
    """(path, None) or (None, reason why there is none)."""
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path, None
    if not install:
        return None, "chromium not installed"
    if os.geteuid() != 0:
        return None, "chromium not installed (as root the tests install Debian's chromium; or: apt-get install chromium)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=900)
    except (OSError, subprocess.SubprocessError) as e:
        return None, "installing chromium failed: %s" % e
    path = shutil.which("chromium")
    return (path, None) if path else (None, "chromium still missing after apt-get install")


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(0.02)


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: text frames,
    fragmentation, ping/pong and close; client frames masked."""

    def __init__(self, url, timeout=30):
        assert url.startswith("ws://")
        hostport, _, path = url[len("ws://"):].partition("/")
        host, _, port = hostport.partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = ("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key))
        self.sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("DevTools closed the connection during the handshake")
            head += chunk
        head, _, self.buffer = head.partition(b"\r\n\r\n")
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise ConnectionError("WebSocket handshake refused: %r" % head[:200])

    def _read(self, n):
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise ConnectionError("DevTools connection closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _send_frame(self, opcode, payload):
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send(self, text):
        self._send_frame(0x1, text.encode())

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            if opcode == 0x8:
                raise ConnectionError("DevTools closed the WebSocket")
            message += payload
            if b0 & 0x80:
                return message.decode("utf-8")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Page:
    """A CDP session with one tab. Console errors, uncaught exceptions and
    error log entries are collected in .errors as they arrive."""

    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.next_id = 0
        self.events = []
        self.errors = []
        for domain in ("Runtime", "Log", "Page"):
            self.call(domain + ".enable")

    def _note(self, event):
        method, params = event.get("method"), event.get("params", {})
        self.events.append(method)
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            desc = (details.get("exception") or {}).get("description") or details.get("text")
            self.errors.append("exception: %s" % desc)
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [a.get("value", a.get("description")) for a in params.get("args", [])]
            self.errors.append("console.%s: %s" % (params.get("type"), args))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append("log (%s): %s %s" % (entry.get("source"), entry.get("text"), entry.get("url", "")))

    def call(self, method, params=None, timeout=60):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params or {}}))
        self.ws.sock.settimeout(timeout)
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == my_id:
                if "error" in message:
                    raise RuntimeError("%s failed: %s" % (method, message["error"]))
                return message.get("result", {})
            if "method" in message:
                self._note(message)

    def evaluate(self, expression, timeout=60):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in result:
            raise RuntimeError("evaluating %r threw: %s" % (expression, result["exceptionDetails"]))
        return result.get("result", {}).get("value")

    def open(self, url, ready_expression, timeout=60):
        """Navigates and polls ready_expression until it is truthy. Returns
        the wall-clock seconds from the navigation to that moment."""
        start = time.monotonic()
        self.call("Page.navigate", {"url": url})
        deadline = start + timeout
        while True:
            try:
                ready = self.evaluate(ready_expression)
            except RuntimeError:
                ready = False      # the old document went away under the evaluation
            if ready:
                return time.monotonic() - start
            if time.monotonic() > deadline:
                raise TimeoutError("%s: %s not true after %.0fs; errors: %s"
                                   % (url, ready_expression, timeout, self.errors))
            time.sleep(0.01)

    def set_viewport(self, width, height):
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def close(self):
        self.ws.close()


class Browser:
    """with Browser() as b: page = b.page(); ..."""

    def __init__(self, binary=None, width=1400, height=1000, extra_flags=()):
        self.binary = binary or find_chromium()[0]
        if not self.binary:
            raise RuntimeError("no chromium")
        self.width, self.height = width, height
        self.extra_flags = list(extra_flags)
        self.proc = None
        self.profile = None
        self.port = None

    def __enter__(self):
        self.profile = tempfile.mkdtemp(prefix="pyscope-chromium-")
        self.stderr_path = Path(self.profile) / "stderr.log"
        self.stderr = open(self.stderr_path, "wb")
        argv = ([self.binary] + CHROMIUM_FLAGS + self.extra_flags +
                ["--user-data-dir=" + self.profile, "--remote-debugging-port=0",
                 "--window-size=%d,%d" % (self.width, self.height), "about:blank"])
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.stderr, start_new_session=True)
        active = Path(self.profile) / "DevToolsActivePort"

        def port():
            if self.proc.poll() is not None:
                raise RuntimeError("chromium exited with %s:\n%s"
                                   % (self.proc.returncode, self.stderr_path.read_text(errors="replace")[-2000:]))
            try:
                lines = active.read_text().split()
            except OSError:
                return None
            return int(lines[0]) if lines else None
        self.port = _wait_for(port, 60, "chromium's DevTools port")
        return self

    def page(self):
        def page_target():
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % self.port, timeout=10) as r:
                targets = json.load(r)
            pages = [t for t in targets if t.get("type") == "page" and "webSocketDebuggerUrl" in t]
            return pages[0]["webSocketDebuggerUrl"] if pages else None
        return Page(_wait_for(page_target, 30, "chromium's tab"))

    def stderr_text(self):
        self.stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=20)
        self.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)


def screenshot(binary, url, png_path, width=1400, height=1000, timeout=120, extra_flags=()):
    """chromium --headless --screenshot; returns its stderr (with
    --enable-logging=stderr, which shows the page's console messages)."""
    profile = tempfile.mkdtemp(prefix="pyscope-chromium-")
    try:
        argv = ([binary] + CHROMIUM_FLAGS +
                list(extra_flags) +
                ["--user-data-dir=" + profile, "--enable-logging=stderr", "--v=0",
                 "--window-size=%d,%d" % (width, height), "--screenshot=" + str(png_path), url])
        out = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=timeout, start_new_session=True)
        return out.stdout.decode(errors="replace")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def png_pixels(path):
    """(width, height, channels, rows of bytes) of an 8-bit, non-interlaced
    greyscale, RGB or RGBA PNG: what Chromium writes."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("%s is not a PNG" % path)
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError("unsupported PNG (depth %d, colour type %d, interlace %d)" % (depth, color, interlace))
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((a + b) >> 1)) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + _paeth(a, b, c)) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def png_colors(path):
    """Distinct colours in the PNG, and its size."""
    width, height, channels, rows = png_pixels(path)
    colors = set()
    for row in rows:
        for x in range(0, len(row), channels):
            colors.add(row[x:x + channels])
    return len(colors), width, height
