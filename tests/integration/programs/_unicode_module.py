"""Module copied by unicode_names.py to a file with a non-ASCII name
(dír_目录/módulo_ñ_模块.py) and imported from there, so that frames of its
functions have a non-ASCII co_filename. Not meant to be run directly."""

import time


def 日本語の関数():
    # UCS-2 (2-byte) function name in a UCS-2 file name.
    while True:
        time.sleep(3600)


class Señal:
    def método(self):
        # Latin-1 qualified name "Señal.método" (3.11+).
        while True:
            time.sleep(3600)
