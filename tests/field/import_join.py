"""A module starts a thread at import time and joins it; the thread imports
the module (or anything that needs its module lock) and waits for the
import to finish.

Source: the threading documentation, "Importing in threaded code": "other
than in the main module, an import should not have the side effect of
spawning a new thread and then waiting for that thread in any way. Failing
to abide by this restriction can lead to a deadlock", and Python issues
bpo-8098 and gh-84394.

Senior engineer: deadlock, certain: the main thread (importing
_import_join_mod) joins the importer thread, which waits for that module's
import lock, held by the main thread.
"""

import _field  # noqa: F401


def main():
    import _import_join_mod  # noqa: F401


if __name__ == "__main__":
    main()
