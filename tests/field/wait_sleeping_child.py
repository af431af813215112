"""subprocess.run() of a child that is slow, not stuck: the parent waits for
it to exit while it sleeps.

Source: the everyday shape of subprocess.run / Popen.wait without a timeout
(the documentation's own examples); the other side of
fork_held_lock_parent.py, so that a wait for a child is called stuck only
when the child is.

Senior engineer: idle, not hung: the parent waits for a child that is alive
and waiting for a timer; it will exit when its sleep ends.
"""

import subprocess
import sys

import _field


def main():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    _field.report_later(_field.expect("idle", None), extra={"child": child.pid},
                        before=_field.main_blocked_in("_try_wait"))
    child.wait()


if __name__ == "__main__":
    main()
