"""Target: idle threads with a short name, a long ASCII name and a long
accented one, as thread pools name them, for the alignment of the record
summary's thread table.

extra.names: the thread names.

usage: python long_names.py REPORT.json
"""

import sys
import threading

sys.dont_write_bytecode = True
import _target  # noqa: E402

NAMES = ["w", "ThreadPoolExecutor-ingest-workers-for-the-nightly-batch_0",
         "pr\u00e9paration-des-donn\u00e9es-de-la-file-d\u2019attente-num\u00e9ro-1"]
NEVER = threading.Event()


def main():
    path = _target.report_path()
    for name in NAMES:
        threading.Thread(target=NEVER.wait, name=name, daemon=True).start()
    _target.park(__file__, path, extra={"names": NAMES})


if __name__ == "__main__":
    main()
