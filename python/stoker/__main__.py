"""`python -m stoker ...`, and the `stoker` command of a pip install: runs the
CLI the package carries (beside libstoker.so.0), with the same arguments."""

import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stoker")
    if not os.access(exe, os.X_OK):
        sys.exit("stoker: this package carries no CLI (%s): it comes with pip install "
                 "./python; make install and the Debian package put it in bin/" % exe)
    os.execv(exe, ["stoker"] + sys.argv[1:])


if __name__ == "__main__":
    main()
