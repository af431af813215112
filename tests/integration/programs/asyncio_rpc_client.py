"""An RPC client whose replies never come, the usual way: RpcClient.call
keeps each request's Future in self._pending[request_id] until its reader
task reads the reply. The server (on port 0, same loop) answers "ping" and
never "stuck": the tasks "call-1" and "call-3" wait forever, their Futures
held by RpcClient._pending[1] and [3] (the client is reachable from the
local `client` of main, and `self` of the reader and of both calls).
Beside it: a connection pool that parks waiters in a deque (the module
global POOL), a supervisor that keeps Futures in a dict of lists (its local
`waiters`), a batcher that logs every Future it hands out in a list (30,000
done, then the one task "batch" awaits: Batcher._sent[30000]) beside a global
window of 60,000 latencies, and a Future a call_soon callback would complete
if the loop ran: main blocks the loop (time.sleep) once everything is set up.

extra: {"loop_tid",
        "held": {task name: {"address", "holder", "via", "roots"}} where
                holder is the expression that holds the Future
                ("RpcClient._pending[1]"), via what that first object is
                ("the object", "the dict") and roots every variable it is
                reachable from ({"who", "var", "function", "file", "line"};
                who is 'task "x"', 'thread N' or None for a global),
        "call_soon": {"address", "callback"},
        "referrers": {task name: the types of the referrers of its Future
                      outside its own chain (gc's view): one each, the holder}}
"""

import asyncio
import collections
import gc
import json
import sys
import threading
import time

import _target


class RpcClient:
    def __init__(self, reader, writer):
        self._reader = reader
        self._writer = writer
        self._pending = {}
        self._next_id = 0

    async def call(self, method):
        self._next_id += 1
        request_id = self._next_id
        fut = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        self._writer.write(json.dumps({"id": request_id, "method": method}).encode() + b"\n")
        return await fut

    async def read_replies(self):
        while True:
            line = await self._reader.readline()
            if not line:
                return
            reply = json.loads(line)
            self._pending.pop(reply["id"]).set_result(reply["result"])


class Pool:
    """No connection is ever free: every acquire parks in _waiters."""

    def __init__(self):
        self._waiters = collections.deque()

    async def acquire(self):
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return await fut


POOL = Pool()


class Batcher:
    """Keeps every Future it hands out, answered or not."""

    def __init__(self):
        self._sent = []

    async def submit(self):
        fut = asyncio.get_running_loop().create_future()
        self._sent.append(fut)
        return await fut


BATCHER = Batcher()
BATCHED = 30000
LATENCIES = [i / 7.0 for i in range(60000)]


async def serve(reader, writer):
    while True:
        line = await reader.readline()
        if not line:
            return
        request = json.loads(line)
        if request["method"] == "ping":
            writer.write(json.dumps({"id": request["id"], "result": "pong"}).encode() + b"\n")


async def wait_on(fut):
    await fut


async def supervise(ready):
    loop = asyncio.get_running_loop()
    waiters = {"shutdown": [loop.create_future()], "reload": [loop.create_future()]}
    ready.set_result([loop.create_task(wait_on(f)) for fs in waiters.values() for f in fs])
    await asyncio.sleep(3600)


def where(task):
    frame = task.get_coro().cr_frame
    return _target.function_name(frame.f_code), frame.f_code.co_filename, frame.f_lineno


def root(task, var):
    function, file, line = where(task)
    return {"who": 'task "%s"' % task.get_name(), "var": var, "function": function,
            "file": file, "line": line}


def others(fut, task):
    """Referrers of fut outside its waiting task's own chain."""
    mine = {id(task), id(task.get_coro()), id(task.get_coro().cr_frame)}
    return [type(r).__name__ for r in gc.get_referrers(fut)
            if id(r) not in mine and not type(r).__name__.endswith("FutureIter")
            and r is not sys._getframe()]


def named(task, name):
    task.set_name(name)
    return task


async def main(path):
    loop = asyncio.get_running_loop()
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = RpcClient(*await asyncio.open_connection("127.0.0.1", port))
    reader = named(loop.create_task(client.read_replies()), "reader")
    calls = [named(loop.create_task(client.call(m)), "call-%d" % (i + 1))
             for i, m in enumerate(["stuck", "ping", "stuck", "ping"])]
    await calls[1]
    await calls[3]
    acquire = named(loop.create_task(POOL.acquire()), "acquire")
    for _ in range(BATCHED):
        answered = loop.create_future()
        answered.set_result(None)
        BATCHER._sent.append(answered)
    batch = named(loop.create_task(BATCHER.submit()), "batch")
    ready = loop.create_future()
    supervisor = named(loop.create_task(supervise(ready)), "supervisor")
    shutdown, reload = await ready
    named(shutdown, "shutdown")
    named(reload, "reload")
    soon = loop.create_future()
    by_call_soon = named(loop.create_task(wait_on(soon)), "by_call_soon")
    await asyncio.sleep(0.1)
    loop.call_soon(soon.set_result, None)
    del soon

    main_line = _target.marker_line(main, "# blocked-here")
    client_roots = [root(t, "self") for t in (reader, calls[0], calls[2])]
    client_roots.append({"who": "thread %d" % threading.get_native_id(), "var": "client",
                         "function": _target.function_name(main.__code__),
                         "file": main.__code__.co_filename, "line": main_line})
    held = {}
    for name, task, request_id in (("call-1", calls[0], 1), ("call-3", calls[2], 3)):
        assert client._pending[request_id] is task._fut_waiter
        held[name] = {"holder": "RpcClient._pending[%d]" % request_id, "via": "the object",
                      "roots": client_roots}
    assert POOL._waiters[0] is acquire._fut_waiter
    held["acquire"] = {"holder": "Pool._waiters[0]", "via": "the object",
                       "roots": [{"who": None, "var": "POOL"}]}
    assert BATCHER._sent[BATCHED] is batch._fut_waiter
    held["batch"] = {"holder": "Batcher._sent[%d]" % BATCHED, "via": "the object",
                     "roots": [{"who": None, "var": "BATCHER"}]}
    for name, task in (("shutdown", shutdown), ("reload", reload)):
        held[name] = {"holder": "waiters['%s'][0]" % name, "via": "the dict",
                      "roots": [root(supervisor, "waiters")]}
    tasks = dict(calls=calls, acquire=acquire, shutdown=shutdown, reload=reload, batch=batch)
    for name in held:
        task = {"call-1": calls[0], "call-3": calls[2]}.get(name) or tasks[name]
        held[name]["address"] = id(task)
    referrers = {name: others(t._fut_waiter, t) for name, t in (
        ("call-1", calls[0]), ("call-3", calls[2]), ("acquire", acquire),
        ("shutdown", shutdown), ("reload", reload), ("batch", batch),
        ("by_call_soon", by_call_soon))}
    extra = {"loop_tid": threading.get_native_id(), "held": held,
             "call_soon": {"address": id(by_call_soon), "callback": "set_result"},
             "referrers": referrers}
    _target.write_report(path, _target.build_report("asyncio_rpc_client.py", [], extra))
    time.sleep(3600)  # blocked-here
    return server, reader, tasks, by_call_soon


if __name__ == "__main__":
    sys.exit(asyncio.run(main(_target.report_path())))
