"""Imported by import_join.py: starts a thread at import time that imports
this very module, and waits for it before the import finishes."""

import threading
import _field

_ready = []


def _use_module():
    import _import_join_mod  # noqa: F401  waits for the module lock the importer holds
    _ready.append(True)


_helper = threading.Thread(target=_use_module, name="importer")
_helper.start()
_field.report_later(_field.expect("deadlock", "certain", threads=["MainThread", "importer"]),
                    objects={})
_helper.join()
