"""Build script: compiles mcpsync/_speedups with Cython.

Each single source, ``mcpsync/_speedups/_pyspeedups.py``, ``_pypipes.py`` and ``_pyhttp.py``, is
copied to ``build/cython/mcpsync/_speedups/`` as ``_cspeedups.py`` / ``_cpipes.py`` / ``_chttp.py``
and compiled (Cython's pure-Python mode) into the extensions ``mcpsync._speedups._cspeedups``,
``_cpipes`` and ``_chttp``. A failed compile fails the
build, unless ``MCPSYNC_NO_EXTENSIONS=1`` asks for the pure-Python package.

Failing, rather than falling back to the pure-Python package, is deliberate: pip shows a
successful build's output only with ``-v``, so a fallback warning would go unseen and the
user would get a slower client without knowing. The failure says what is missing and how
to ask for the pure-Python package on purpose.
"""

import os
import shutil

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:  # setuptools' vendored distutils (Python 3.12+ has no stdlib distutils)
    from setuptools.errors import CCompilerError, ExecError, PlatformError
except ImportError:  # pragma: no cover - setuptools < 59
    from distutils.errors import CCompilerError
    from distutils.errors import DistutilsExecError as ExecError
    from distutils.errors import DistutilsPlatformError as PlatformError

HERE = os.path.dirname(os.path.abspath(__file__))
#: (pure-Python source, compiled module) in mcpsync/_speedups: the hot path's cache, tallies and
#: fast path (_cspeedups), the stdio pipe (_cpipes), the Streamable HTTP transport's JSON lane (_chttp)
MODULES = (("_pyspeedups", "_cspeedups"), ("_pypipes", "_cpipes"), ("_pyhttp", "_chttp"))
NO_EXTENSIONS = os.environ.get("MCPSYNC_NO_EXTENSIONS", "") not in ("", "0")


def extensions():
    if NO_EXTENSIONS:
        print("MCPSYNC_NO_EXTENSIONS is set: building the pure-Python package")
        return []
    from Cython.Build import cythonize  # a build requirement: missing Cython fails loudly

    gen_dir = os.path.join(HERE, "build", "cython", "mcpsync", "_speedups")
    os.makedirs(gen_dir, exist_ok=True)
    exts = []
    for source, compiled in MODULES:  # each single source copied under its compiled name, its .pxd beside it
        gen = os.path.join(gen_dir, compiled + ".py")
        shutil.copyfile(os.path.join(HERE, "mcpsync", "_speedups", source + ".py"), gen)
        pxd = os.path.join(HERE, "mcpsync", "_speedups", compiled + ".pxd")
        if os.path.exists(pxd):
            shutil.copyfile(pxd, os.path.join(gen_dir, compiled + ".pxd"))
        exts.append(Extension("mcpsync._speedups." + compiled, [os.path.relpath(gen, HERE)]))
    return cythonize(
        exts,
        compiler_directives={"language_level": "3", "binding": False, "boundscheck": False, "wraparound": True},
        build_dir=os.path.join("build", "cython-c"),
        quiet=True,
    )


NO_COMPILER_HELP = """
mcpsync: could not compile its C extension ({error}).

Building mcpsync compiles mcpsync/_speedups with a C compiler and the Python headers.
Either install them (Debian/Ubuntu: apt-get install gcc python3-dev; Fedora: dnf install
gcc python3-devel; macOS: xcode-select --install), or build the pure-Python package,
which works the same, only slower:

    {install}
"""


def install_command():
    """The command that installs what is being built as the pure-Python package: this
    source directory when it is one (a checkout, an unpacked sdist), the PyPI name when pip
    unpacked it into one of its temporary directories (``pip install mcpsync``, or the URL
    or file you gave pip)."""
    if os.path.basename(os.path.dirname(HERE)).startswith(("pip-install-", "pip-req-build-")) or \
            os.path.basename(HERE).startswith(("pip-install-", "pip-req-build-")):
        return "MCPSYNC_NO_EXTENSIONS=1 pip install mcpsync    (or the same file or URL you gave pip)"
    return f"MCPSYNC_NO_EXTENSIONS=1 pip install {HERE}"


class BuildExt(build_ext):
    """build_ext whose failure to compile names the fix (a compiler, or MCPSYNC_NO_EXTENSIONS=1)."""

    def _explain(self, exc):
        # SystemExit with a text: setuptools prints it on stderr, pip shows it in its error
        return SystemExit(NO_COMPILER_HELP.format(error=str(exc).strip() or type(exc).__name__, install=install_command()))

    def run(self):
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError, OSError) as exc:
            raise self._explain(exc) from exc

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as exc:
            raise self._explain(exc) from exc


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
