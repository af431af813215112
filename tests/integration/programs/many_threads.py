"""Target: 100 named threads, half in Event.wait, half in time.sleep, at
stack depths that vary from thread to thread.

usage: python many_threads.py REPORT.json
"""

import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

COUNT = 100
never = threading.Event()


def wait_for_event():
    never.wait()


def sleep_forever():
    while True:
        time.sleep(3600)


def nest(levels, blocker):
    if levels > 0:
        return nest(levels - 1, blocker)
    return blocker()


def main():
    path = _target.report_path()
    names = []
    for index in range(COUNT):
        if index % 2 == 0:
            name, blocker = "waiter-%03d" % index, wait_for_event
        else:
            name, blocker = "sleeper-%03d" % index, sleep_forever
        thread = threading.Thread(target=nest, args=(index % 7, blocker),
                                  name=name, daemon=True)
        thread.start()
        names.append(name)
    _target.park(__file__, path, extra={"workers": names})


if __name__ == "__main__":
    main()
