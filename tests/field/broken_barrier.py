"""A Barrier that never fills: one of its three parties died of an
exception before reaching wait(), and the other two wait without timeout.

Source: the threading documentation on Barrier ("if a party is expected to
fail, use a timeout or abort()"), and Python issue bpo-34237 discussions of
barriers left waiting when a worker raises.

Senior engineer: never_notified, certain: party-0 and party-1 wait on the
barrier forever; the third party has exited and the main thread only joins.
"""

import threading

import _field


def party(barrier, fail):
    if fail:
        raise RuntimeError("setup failed")
    barrier.wait()


def main():
    _field.quiet_excepthook()
    barrier = threading.Barrier(3)
    parties = [threading.Thread(target=party, args=(barrier, i == 2), name="party-%d" % i)
               for i in range(3)]
    for t in parties:
        t.start()
    parties[2].join()
    _field.report_later(_field.expect("never_notified", "certain",
                                      threads=["party-0", "party-1"], blocked=["MainThread"],
                                      objects=["barrier"]),
                        objects={"barrier": id(barrier)})
    del barrier
    for t in parties[:2]:
        t.join()


if __name__ == "__main__":
    main()
