"""asyncio tasks waiting in every kind of await dump describes in detail,
each named after what it does:

    "timed": asyncio.wait_for(event.wait(), 600), an event nobody sets
    "child": a subprocess's wait() (a `sleep 600` it started)
    "reader": StreamReader.read() on a connection to a local server that
              accepted it and never writes
    "server_reader": the server's handler task, reading the connection it
              accepted, to which the client never writes either (a server
              waiting for its client: idle, not hung)
    "holder": inside `async with lock:`, asleep
    "lock_waiter": waiting to enter `async with lock:` (the same lock)
    "cond_waiter": inside `async with cond:`, in cond.wait()
    "sem_holder_1", "sem_holder_2": inside `async with sem:` (a Semaphore(2)), asleep
    "sem_waiter": waiting to enter `async with sem:`
    "nested": asyncio.gather(asyncio.gather(a, b), c)
    "wait_any": asyncio.wait({w1, w2}, timeout=600, return_when=FIRST_COMPLETED)
    "wait_all": asyncio.wait({w3})
    "putter": queue.put() on a full asyncio.Queue(maxsize=1)
    "timeout_waiter": `async with asyncio.timeout(600):` event.wait() (3.11+)

extra: {"loop_tid", "loop": id(loop),
        "tasks": [_asyncio_truth.task_truth(task) of every task of the loop,
                  with "role" (the name above, or null), "gather": how many
                  a gather it awaits has, "deadline": the loop's time
                  (time.monotonic) its own timeout fires, or null,
                  "queue": [items queued, maxsize] of the queue it waits on,
                  "holders": names of the tasks inside an `async with` of
                  the lock or semaphore it waits for, "wait": [tasks,
                  return_when] of an asyncio.wait],
        "child_pid", "peer": the server's "host:port" as the reader sees it,
        "local": the reader's, "fd": the reader's socket's fd,
        "server_fd": the server side's}
"""

import asyncio
import gc
import sys
import threading
import time

import _target
from _asyncio_truth import all_tasks, chain_frames, locals_of, task_truth, timer_due


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


async def cond_waiter(cond):
    async with cond:
        await cond.wait()


async def sleep_long():
    await asyncio.sleep(3600)


async def nested():
    await asyncio.gather(asyncio.gather(sleep_long(), sleep_long()), sleep_long())


async def wait_any(tasks):
    await asyncio.wait(tasks, timeout=600, return_when=asyncio.FIRST_COMPLETED)


async def wait_all(tasks):
    await asyncio.wait(tasks)


async def putter(queue):
    await queue.put(2)


async def timeout_waiter(event):
    async with asyncio.timeout(600):
        await event.wait()


def deadline_of(task):
    """When the task's wait times out by itself, in the loop's time: the
    timeout_handle of a wait_for (up to 3.11) or asyncio.wait frame of its
    chain, or an asyncio.timeout() (wait_for's own from 3.12) acting on it."""
    due = []
    for frame, _ in chain_frames(task):
        if frame.f_code.co_name in ("wait_for", "_wait") and frame.f_code.co_filename.endswith(
                "asyncio/tasks.py"):
            handle = locals_of(frame).get("timeout_handle")
            if handle is not None:
                due.append(handle.when())
    due.extend(t.when() for t in gc.get_objects()
               if type(t).__name__ == "Timeout" and getattr(t, "_task", None) is task and
               t.when() is not None)
    return min(due) if due else None


def report(path, loop, tasks, queue, holders, facts):
    _target.wait_settled()
    roles = {id(task): name for name, task in tasks.items()}
    truth = []
    for task in all_tasks(loop):
        t = task_truth(task)
        role = roles.get(id(task))
        waiter = task._fut_waiter
        t.update(role=role, deadline=deadline_of(task), sleep_due=timer_due(loop, waiter),
                 gather=len(waiter._children) if hasattr(waiter, "_children") else None,
                 queue=[queue.qsize(), queue.maxsize] if role == "putter" else None,
                 holders=holders.get(role),
                 wait={"wait_any": [2, "FIRST_COMPLETED"],
                       "wait_all": [1, "ALL_COMPLETED"]}.get(role))
        truth.append(t)
    facts["tasks"] = truth
    _target.write_report(path, _target.build_report("asyncio_waits.py", [], facts))
    while True:
        time.sleep(3600)


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
    tasks = {"timed": asyncio.ensure_future(timed(event)),
             "child": asyncio.ensure_future(child(proc)),
             "reader": asyncio.ensure_future(reader(stream))}
    lock, entered = asyncio.Lock(), asyncio.Event()
    tasks["holder"] = asyncio.ensure_future(holder(lock, entered))
    await entered.wait()
    tasks["lock_waiter"] = asyncio.ensure_future(lock_waiter(lock))
    cond = asyncio.Condition()
    tasks["cond_waiter"] = asyncio.ensure_future(cond_waiter(cond))
    sem = asyncio.Semaphore(2)
    for i in (1, 2):
        entered = asyncio.Event()
        tasks["sem_holder_%d" % i] = asyncio.ensure_future(holder(sem, entered))
        await entered.wait()
    tasks["sem_waiter"] = asyncio.ensure_future(lock_waiter(sem))
    tasks["nested"] = asyncio.ensure_future(nested())
    for name in ("w1", "w2", "w3"):
        tasks[name] = asyncio.ensure_future(sleep_long())
    tasks["wait_any"] = asyncio.ensure_future(wait_any({tasks["w1"], tasks["w2"]}))
    tasks["wait_all"] = asyncio.ensure_future(wait_all({tasks["w3"]}))
    queue = asyncio.Queue(maxsize=1)
    queue.put_nowait(1)
    tasks["putter"] = asyncio.ensure_future(putter(queue))
    if hasattr(asyncio, "timeout"):
        tasks["timeout_waiter"] = asyncio.ensure_future(timeout_waiter(asyncio.Event()))
    for name, task in tasks.items():
        task.set_name(name)
    while not accepted:
        await asyncio.sleep(0.01)
    # Until every task has taken its first steps and waits.
    for _ in range(20):
        await asyncio.sleep(0)
    await asyncio.sleep(0.1)
    local = writer.get_extra_info("sockname")
    handlers[0].set_name("server_reader")
    tasks["server_reader"] = handlers[0]
    facts = {"loop_tid": threading.get_native_id(), "loop": id(loop),
             "child_pid": proc.pid, "peer": "%s:%d" % (host, port),
             "local": "%s:%d" % tuple(local[:2]),
             "fd": writer.get_extra_info("socket").fileno(),
             "server_fd": accepted[0].get_extra_info("socket").fileno()}
    # Inside their `async with` (they set their event there), and still.
    assert lock.locked() and sem.locked()
    holders = {"lock_waiter": ["holder"], "sem_waiter": ["sem_holder_1", "sem_holder_2"]}
    # Read from another thread once the loop sleeps in its selector, main
    # too in its last await.
    threading.Thread(target=report, args=(path, loop, tasks, queue, holders, facts),
                     daemon=True).start()
    try:
        await asyncio.sleep(3600)
    finally:
        proc.kill()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(_target.report_path())))
