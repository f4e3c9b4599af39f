#!/usr/bin/env python3
"""Build a compiled codec with AddressSanitizer: nsq/_frame.pyx (the default) or
pulsarfast/wire/_codec.pyx (``--package pulsarfast``).

The result is a private copy of the package, <dir>/<package>/, whose compiled
module is built with gcc -fsanitize=address (same Cython directives as
setup.py) and whose .py files link to the source tree's. Put <dir> first on
PYTHONPATH and preload gcc's libasan.so to use it (fuzz_decoder.py --asan and
fuzz_pulsar.py --asan do all of that). The source tree (the generated .c, the
installed .so) is never touched.

Usage: python fuzz/build_asan.py [--package nsq|pulsarfast] [--dir build/nsq-asan]   (prints the dir)
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_DIR = os.path.join(REPO, "build", "nsq-asan")
#: package -> its compiled module (the one .pyx built with ASan), inside the package
MODULES = {"nsq": "_frame", "pulsarfast": "wire._codec"}
#: package -> where its ASan build goes by default
DEFAULT_DIRS = {"nsq": DEFAULT_DIR, "pulsarfast": os.path.join(REPO, "build", "pulsarfast-asan")}

ASAN_FLAGS = ["-fsanitize=address", "-fno-omit-frame-pointer", "-g", "-O1"]


def build(target: str = DEFAULT_DIR, quiet: bool = True, pyx_text: str | None = None, package: str = "nsq") -> str:
    """Build package's compiled module into target (replacing an earlier build); pyx_text
    replaces the .pyx source (selftest)."""
    from Cython.Build import cythonize
    from setuptools import Extension
    from setuptools.dist import Distribution

    name, module = package, MODULES[package]
    package = os.path.join(target, name)
    if os.path.isdir(package):
        shutil.rmtree(package)
    os.makedirs(package)
    source = os.path.join(REPO, name)
    for folder, folders, files in os.walk(source):  # the package's tree, each .py and .pyi a link
        folders[:] = [f for f in folders if f != "__pycache__"]
        copy = os.path.join(package, os.path.relpath(folder, source))
        os.makedirs(copy, exist_ok=True)
        for file in files:
            if file.endswith((".py", ".pyi")):
                os.symlink(os.path.join(folder, file), os.path.join(copy, file))
    pyx = module.replace(".", "/") + ".pyx"
    if pyx_text is None:
        shutil.copy(os.path.join(source, pyx), os.path.join(package, pyx))
    else:
        with open(os.path.join(package, pyx), "w") as f:
            f.write(pyx_text)

    cwd = os.getcwd()
    os.chdir(target)  # cythonize and build_ext work with paths relative to the package root
    try:
        ext = Extension(
            "%s.%s" % (name, module), ["%s/%s" % (name, pyx)], extra_compile_args=ASAN_FLAGS,
            extra_link_args=["-fsanitize=address"],
        )
        modules = cythonize(
            [ext], language_level=3, quiet=quiet,
            compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True, "embedsignature": True},
        )
        dist = Distribution({"name": name + "-asan", "ext_modules": modules})
        cmd = dist.get_command_obj("build_ext")
        cmd.inplace = True
        cmd.build_temp = os.path.join(target, "temp")
        cmd.ensure_finalized()
        cmd.run()
    finally:
        os.chdir(cwd)
    built = glob.glob(os.path.join(package, module.replace(".", "/") + "*.so"))
    if not built:
        raise SystemExit("the ASan build produced no extension module in %s" % package)
    return target


SELFTEST_DIR = os.path.join(REPO, "build", "nsq-asan-selftest")
SELFTEST_DIRS = {"nsq": SELFTEST_DIR, "pulsarfast": os.path.join(REPO, "build", "pulsarfast-asan-selftest")}
# One byte too many copied into the decoder's buffer: the bug ASan must catch.
SEEDED_BUG = ("memcpy(self._buf + self._len, p, k)", "memcpy(self._buf + self._len, p, k + 1)")
SELFTEST_FEED = (
    "from nsq import _frame\n"
    "assert 'nsq-asan-selftest' in _frame.__file__, _frame.__file__\n"
    "d = _frame.FrameDecoder()\n"
    "d.feed(bytearray(b'\\x00\\x00\\x00\\x10\\x00\\x00'))\n"
    "d.feed(bytearray(b'\\x00\\x00abcdefghijkl'))\n"
    "print('no error detected')\n"
)
# pulsarfast's FrameDecoder holds an unfinished frame the same way (the same seeded line)
SELFTEST_FEEDS = {
    "nsq": SELFTEST_FEED,
    "pulsarfast": (
        "from pulsarfast.wire import _codec\n"
        "assert 'pulsarfast-asan-selftest' in _codec.__file__, _codec.__file__\n"
        "d = _codec.FrameDecoder()\n"
        "d.feed(bytearray(b'\\x00\\x00\\x00\\x10\\x00\\x00'))\n"
        "d.feed(bytearray(b'\\x00\\x0cabcdefghijkl'))\n"
        "print('no error detected')\n"
    ),
}


def selftest(env_for, package: str = "nsq") -> dict:
    """Build a copy with a seeded one-byte heap overflow and check that ASan stops it.

    env_for(build_dir) gives the environment to run under (fuzz_decoder.asan_env)."""
    import subprocess

    module = MODULES[package]
    with open(os.path.join(REPO, package, module.replace(".", "/") + ".pyx")) as f:
        text = f.read()
    if SEEDED_BUG[0] not in text:
        return {"asan_selftest": "skipped: the seeded line is not in %s.pyx any more" % module}
    target = build(SELFTEST_DIRS[package], pyx_text=text.replace(SEEDED_BUG[0], SEEDED_BUG[1]), package=package)
    # cwd=target: with -c the current directory comes first on sys.path
    run = subprocess.run([sys.executable, "-c", SELFTEST_FEEDS[package]], env=env_for(target), capture_output=True,
                         text=True, timeout=120, cwd=target)
    caught = run.returncode != 0 and "AddressSanitizer: heap-buffer-overflow" in run.stderr
    shutil.rmtree(target, ignore_errors=True)
    if not caught:
        raise SystemExit("ASan selftest FAILED: a seeded heap overflow went unnoticed (exit %d)\n%s"
                         % (run.returncode, run.stderr[-2000:]))
    return {"asan_selftest": "seeded one-byte heap overflow in %s.%s FrameDecoder._append detected" % (package, module)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--package", choices=sorted(MODULES), default="nsq")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    print(build(os.path.abspath(args.dir or DEFAULT_DIRS[args.package]), quiet=False, package=args.package))
    return 0


if __name__ == "__main__":
    sys.exit(main())
