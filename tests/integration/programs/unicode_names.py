"""Target: non-ASCII names everywhere pyscope prints one.

  * function names of each string width CPython stores: latin-1
    (función_señal), UCS-2 (日本語の関数), UCS-4 (𐌷𐌰𐌻𐌻𐍉_𠮷: Gothic letters and a
    CJK extension B ideograph, all outside the BMP);
  * a function whose name is not an identifier at all (an emoji, set with
    code.replace);
  * a module with a non-ASCII file name in a non-ASCII directory;
  * non-ASCII thread names, and one with characters JSON must escape.

Why not mathematical letters such as 𝔣𝔲𝔫𝔠 in a def: Python NFKC-normalizes
identifiers, so `def 𝔣𝔲𝔫𝔠` defines a function named "func".

usage: python unicode_names.py REPORT.json
"""

import importlib
import os
import shutil
import sys
import threading
import time

sys.dont_write_bytecode = True
import _target  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE_DIR = "dír_目录"
MODULE_NAME = "módulo_ñ_模块"


def función_señal():
    while True:
        time.sleep(3600)


def 𐌷𐌰𐌻𐌻𐍉_𠮷():
    while True:
        time.sleep(3600)


def snake():
    while True:
        time.sleep(3600)


def rename(func, name):
    changes = {"co_name": name}
    if hasattr(func.__code__, "co_qualname"):
        changes["co_qualname"] = name
    func.__code__ = func.__code__.replace(**changes)
    return func


def import_unicode_module(report):
    directory = os.path.join(os.path.dirname(os.path.abspath(report)), MODULE_DIR)
    os.makedirs(directory, exist_ok=True)
    shutil.copyfile(os.path.join(HERE, "_unicode_module.py"),
                    os.path.join(directory, MODULE_NAME + ".py"))
    sys.path.insert(0, directory)
    try:
        return importlib.import_module(MODULE_NAME)
    finally:
        sys.path.remove(directory)


def main():
    path = _target.report_path()
    module = import_unicode_module(path)
    emoji = rename(snake, "🐍_serpiente")
    threads = [
        ("hilo-señal", función_señal, ()),
        ("スレッド-日本", module.日本語の関数, ()),
        ("𐌸𐍂𐌴𐌰𐌸-𠮷", 𐌷𐌰𐌻𐌻𐍉_𠮷, ()),
        ("método-ñ", module.Señal().método, ()),
        ("🐍 emoji", emoji, ()),
        ('comillas "x" \\ barra\ttab', función_señal, ()),
    ]
    for name, target, args in threads:
        threading.Thread(target=target, args=args, name=name, daemon=True).start()
    _target.park(__file__, path, extra={"module_file": module.__file__})


if __name__ == "__main__":
    main()
