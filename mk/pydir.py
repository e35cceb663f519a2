"""Where `make install` puts the Python package for a PREFIX: a folder the
interpreter searches where there is one (Debian: /usr/local ->
/usr/local/lib/python3.X/dist-packages, ~/.local -> the user site), else
PREFIX/lib/python3/dist-packages (Debian's own folder under /usr; elsewhere
add it to PYTHONPATH).   usage: python3 mk/pydir.py PREFIX"""
import os
import site
import sys
import sysconfig

prefix = os.path.normpath(sys.argv[1])
if prefix == "/usr/local" and "posix_local" in sysconfig.get_scheme_names():
    print(sysconfig.get_path("purelib", "posix_local"))
elif prefix == os.path.normpath(site.getuserbase()):
    print(site.getusersitepackages())
else:
    print(prefix + "/lib/python3/dist-packages")
