"""asyncio tasks waiting on what dump describes in detail:

    "timed": asyncio.wait_for(event.wait(), 600), an event nobody sets
    "child": a subprocess's wait() (a `sleep 600` it started)
    "reader": StreamReader.read() on a connection to a local server that
              accepted it and never writes
    "holder": inside `async with lock:`, asleep
    "lock_waiter": waiting to enter `async with lock:` (the same lock)
    "server_reader": the server's handler task, reading the connection it
              accepted, to which the client never writes either (a server
              waiting for its client: idle, not hung)

extra: {"loop_tid", "tasks": {name: address}, "deadline": the loop's time
        (time.monotonic) when wait_for gives up, "child_pid", "peer": the
        server's "host:port" as the reader sees it, "local": the reader's}
"""

import asyncio
import sys
import threading
import time

import _target


async def timed(event):
    await asyncio.wait_for(event.wait(), 600)


async def child(proc):
    await proc.wait()


async def reader(stream):
    await stream.read(100)


async def holder(lock, entered):
    async with lock:
        entered.set()
        await asyncio.sleep(3600)


async def lock_waiter(lock):
    async with lock:
        pass


async def main(path):
    loop = asyncio.get_running_loop()
    event = asyncio.Event()
    accepted, handlers = [], []

    async def on_client(r, w):
        accepted.append(w)          # keep it open, never write
        handlers.append(asyncio.current_task())
        await r.read(100)

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    stream, writer = await asyncio.open_connection(host, port)
    proc = await asyncio.create_subprocess_exec("sleep", "600")
    deadline = loop.time() + 600
    tasks = {"timed": asyncio.ensure_future(timed(event)),
             "child": asyncio.ensure_future(child(proc)),
             "reader": asyncio.ensure_future(reader(stream))}
    lock, entered = asyncio.Lock(), asyncio.Event()
    tasks["holder"] = asyncio.ensure_future(holder(lock, entered))
    await entered.wait()
    tasks["lock_waiter"] = asyncio.ensure_future(lock_waiter(lock))
    for name, task in tasks.items():
        task.set_name(name)
    while not accepted:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    local = writer.get_extra_info("sockname")
    handlers[0].set_name("server_reader")
    tasks["server_reader"] = handlers[0]
    extra = {"loop_tid": threading.get_native_id(),
             "tasks": {name: id(task) for name, task in tasks.items()},
             "deadline": deadline, "child_pid": proc.pid,
             "peer": "%s:%d" % (host, port), "local": "%s:%d" % tuple(local[:2])}
    _target.write_report(path, _target.build_report("asyncio_waits.py", [], extra))
    try:
        await asyncio.sleep(3600)
    finally:
        proc.kill()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(_target.report_path())))
