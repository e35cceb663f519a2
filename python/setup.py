"""Builds the wheel `pip install ./python` installs: the package's modules,
libstoker.so.0 built by the source tree's Makefile (into build/, the tree's
own build folder) and carried beside them, where stoker/_lib.py looks first,
the `stoker` CLI beside it (run by the `stoker` command, stoker/__main__.py),
and stoker/_build.py saying the library is bundled and its version.  The
version is STK_VERSION_* in include/stoker/stoker.h, the one owner.  The
wheel holds a C library, so it is tagged for this platform (py3-none-linux_*):
ctypes needs no particular Python ABI."""

import os
import re
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HEADER = os.path.join(ROOT, "include", "stoker", "stoker.h")
BUILD = os.path.join(ROOT, "build")


def version():
    try:
        with open(HEADER) as f:
            text = f.read()
    except OSError as e:
        raise SystemExit("stoker: %s: %s (the Python package is built from a stoker "
                         "source tree: pip install --no-build-isolation ./python)"
                         % (HEADER, e.strerror))
    parts = [re.search(r"^#define STK_VERSION_%s (\d+)\s*$" % k, text, re.M)
             for k in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        raise SystemExit("stoker: %s: no STK_VERSION_MAJOR/MINOR/PATCH" % HEADER)
    return ".".join(m.group(1) for m in parts)


class BuildPy(build_py):
    """The modules, then the C library and CLI from the Makefile, beside them."""

    def run(self):
        super().run()
        # A plain build whatever the environment says (SANITIZE builds elsewhere);
        # under a make, its MAKEFLAGS already say how many jobs.
        jobs = [] if "MAKEFLAGS" in os.environ else ["-j%d" % min(os.cpu_count() or 1, 8)]
        cmd = ["make", "-C", ROOT] + jobs + ["BUILD=build", "SANITIZE=", "build/libstoker.so",
                                             "build/stoker"]
        self.announce("running " + " ".join(cmd), level=2)
        subprocess.check_call(cmd)
        dst = os.path.join(self.build_lib, "stoker")
        shutil.copyfile(os.path.join(BUILD, "libstoker.so.0"), os.path.join(dst, "libstoker.so.0"))
        # Its run path ($ORIGIN) finds the library beside it.
        shutil.copyfile(os.path.join(BUILD, "stoker"), os.path.join(dst, "stoker"))
        os.chmod(os.path.join(dst, "stoker"), 0o755)
        with open(os.path.join(dst, "_build.py"), "w") as f:
            f.write("# Written by python/setup.py: this package carries its libstoker.\n"
                    "VERSION = %r\nLIBDIR = None\nBUNDLED = True\n" % version())


class BinaryDistribution(Distribution):
    """Carries ELF files: installed to platlib (the wheel's root, not its
    .data/purelib), where auditwheel repair looks for what to graft."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPy}
try:
    try:
        from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1
    except ImportError:
        from wheel.bdist_wheel import bdist_wheel

    class BdistWheel(bdist_wheel):
        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = BdistWheel
except ImportError:  # no wheel: pip says what it needs
    pass

# egg_info wants its folder to exist (python -m build runs it first, before build_py).
os.makedirs(os.path.join(BUILD, "python"), exist_ok=True)
setup(
    version=version(),
    distclass=BinaryDistribution,
    cmdclass=cmdclass,
    # setuptools' own scratch space inside the tree's build folder (make clean).
    options={"build": {"build_base": os.path.join(BUILD, "python")},
             "egg_info": {"egg_base": os.path.join(BUILD, "python")}},
)
