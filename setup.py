# Build script: compiles the Cython codecs (nsq/_frame.pyx, pulsarfast/wire/_codec.pyx),
# nsq's blocking publish path (nsq/_publish.pyx, twin nsq/_publish_py.py) and the
# socket calls that keep the GIL (msgengine/_sockio.pyx, twin msgengine/_sockio_py.py)
# when a compiler is available, and installs the pure-Python package when it is
# not, so that the twins (nsq/_frame_py.py, pulsarfast/wire/_codec_py.py) carry them.
# Both codecs cimport the reassembly buffer of msgengine/_buffer.pxd (inline
# functions compiled into each: no extension module of its own).
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

#: the compiled modules and their Cython sources; each is optional
PYX = {
    "nsq._frame": "nsq/_frame.pyx",
    "nsq._publish": "nsq/_publish.pyx",
    "pulsarfast.wire._codec": "pulsarfast/wire/_codec.pyx",
    "msgengine._sockio": "msgengine/_sockio.pyx",
}
#: the Cython declarations both cimport (listed so that a change rebuilds them)
PXD = ["msgengine/_buffer.pxd"]
#: where cimport finds msgengine: the project's root
ROOT = os.path.dirname(os.path.abspath(__file__))


class OptionalBuildExt(build_ext):
    """Build the extension, but treat a failure as 'no compiled codec'."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # pragma: no cover - depends on the machine
            self._warn(", ".join(PYX.get(e.name, e.name) for e in self.extensions), exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # pragma: no cover - depends on the machine
            self._warn(PYX.get(ext.name, ext.name), exc)

    @staticmethod
    def _warn(what, exc):
        sys.stderr.write(
            "nsqfast: could not compile %s (%s); "
            "the pure-Python codec will be used\n" % (what, exc)
        )


def extensions():
    if os.environ.get("NSQ_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    exts = [
        Extension(name, [source], depends=PXD, extra_compile_args=["-O3", "-g0"]) for name, source in PYX.items()
    ]
    return cythonize(
        exts,
        include_path=[ROOT],
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "embedsignature": True,
        },
    )


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
