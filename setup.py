# Build script: compiles the Cython frame codec (nsq/_frame.pyx) when a compiler
# is available, and installs the pure-Python package when it is not, so that
# nsq/_frame_py.py (the twin) carries the codec.
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build the extension, but treat a failure as 'no compiled codec'."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # pragma: no cover - depends on the machine
            self._warn(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # pragma: no cover - depends on the machine
            self._warn(exc)

    @staticmethod
    def _warn(exc):
        sys.stderr.write(
            "nsqfast: could not compile nsq/_frame.pyx (%s); "
            "the pure-Python codec will be used\n" % (exc,)
        )


def extensions():
    if os.environ.get("NSQ_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    ext = Extension("nsq._frame", ["nsq/_frame.pyx"], extra_compile_args=["-O3"])
    return cythonize(
        [ext],
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "embedsignature": True,
        },
    )


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
