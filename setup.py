"""Build script: compiles mcpsync/_speedups with Cython.

The single source ``mcpsync/_speedups/_pyspeedups.py`` is copied to
``build/cython/mcpsync/_speedups/_cspeedups.py`` and compiled (Cython's pure-Python
mode) into the extension ``mcpsync._speedups._cspeedups``. A failed compile fails the
build, unless ``MCPSYNC_NO_EXTENSIONS=1`` asks for the pure-Python package.
"""

import os
import shutil

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
NO_EXTENSIONS = os.environ.get("MCPSYNC_NO_EXTENSIONS", "") not in ("", "0")


def extensions():
    if NO_EXTENSIONS:
        print("MCPSYNC_NO_EXTENSIONS is set: building the pure-Python package")
        return []
    from Cython.Build import cythonize  # a build requirement: missing Cython fails loudly

    src = os.path.join(HERE, "mcpsync", "_speedups", "_pyspeedups.py")
    gen_dir = os.path.join(HERE, "build", "cython", "mcpsync", "_speedups")
    os.makedirs(gen_dir, exist_ok=True)
    gen = os.path.join(gen_dir, "_cspeedups.py")
    shutil.copyfile(src, gen)
    pxd = os.path.join(HERE, "mcpsync", "_speedups", "_cspeedups.pxd")
    if os.path.exists(pxd):
        shutil.copyfile(pxd, os.path.join(gen_dir, "_cspeedups.pxd"))
    ext = Extension("mcpsync._speedups._cspeedups", [os.path.relpath(gen, HERE)])
    return cythonize(
        [ext],
        compiler_directives={"language_level": "3", "binding": False, "boundscheck": False, "wraparound": True},
        build_dir=os.path.join("build", "cython-c"),
        quiet=True,
    )


setup(ext_modules=extensions())
