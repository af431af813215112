"""More tasks than pyscope's walk reads: main makes N tasks (argv[2]) and,
without giving them a step, writes its report and blocks its loop in
time.sleep, so that every one of them stays pending (not started: its
coroutine is in its first line), registered as asyncio keeps them.

extra: {"loop_tid", "tasks": len(asyncio.all_tasks()), main's included}
"""

import asyncio
import sys
import threading
import time

import _target


async def never_started():
    await asyncio.sleep(3600)


async def main(path, n):
    keep = [asyncio.ensure_future(never_started()) for _ in range(n)]
    extra = {"loop_tid": threading.get_native_id(), "tasks": len(asyncio.all_tasks())}
    _target.write_report(path, _target.build_report("asyncio_many.py", [], extra))
    while True:
        time.sleep(3600)    # the loop never runs them
    return keep


if __name__ == "__main__":
    sys.exit(asyncio.run(main(_target.report_path(), int(sys.argv[2]))))
