"""multiprocessing: join() a process before taking what it put on a Queue.

Source: the multiprocessing documentation's programming guidelines,
"Joining processes that use queues": a process that has put items on a
queue waits, before it ends, until its feeder thread has written them all
to the pipe; joining it before the items are taken deadlocks (the guide's
own example puts one large item and joins first).

Senior engineer: deadlock with the child, certain: the parent's MainThread
waits in join() for a child whose feeder thread is blocked writing to the
queue's full pipe, whose only reader is the parent, which never reads it;
the cure is a get() before the join().
"""

import multiprocessing

import _field


def put_big(q):
    q.put("X" * 1000000)


def main():
    # The guide's case; 3.14 made forkserver the default, whose children are
    # not ours to wait for.
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    p = ctx.Process(target=put_big, args=(queue,))
    p.start()
    _field.report_later(_field.expect("deadlock", "certain", threads=["MainThread"]),
                        extra={"child": p.pid, "hint": "Queue before join()"},
                        before=lambda: (_field.blocked_writing(p.pid)(),
                                        _field.main_blocked_in("poll", "wait")()))
    p.join()
    queue.get()


if __name__ == "__main__":
    main()
