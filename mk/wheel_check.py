"""mk/wheel.sh test: the stoker this venv imports is the wheel's, whole.

Run by the venv's python outside the source tree, STOKER_LIB, PYTHONPATH and
LD_LIBRARY_PATH unset.  Checks that the package, libstoker.so.0 and the CLI
are the installed ones, that every library they need resolves (ld.so, no
LD_LIBRARY_PATH) into the wheel's stoker.libs/ except the C library's own and
zlib (which a manylinux wheel may assume and auditwheel does not graft), that
the process mapped none of the system's copies of the grafted libraries, and
that the `stoker` command runs.  Exit 1 naming what is wrong."""

import os
import re
import subprocess
import sys
import sysconfig

# What a system always has: glibc's libraries, the loader, zlib (Debian's
# zlib1g is Priority: required; manylinux lets a wheel assume libz.so.1).
SYSTEM = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
          "libresolv.so.2", "libutil.so.1", "libz.so.1"}
# libstoker's and the CLI's own dependencies (the Makefile's PKGS): each must be grafted.
DIRECT = ("liburing", "libjpeg", "libpng16", "libwebp", "libwebpdemux", "libmicrohttpd",
          "libcurl")
CLI_DIRECT = ("libjansson",)

errors = []


def check(ok, what):
    if not ok:
        errors.append(what)


def ldd(path):
    """{soname: resolved path or None} as ld.so resolves them for `path`."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    out = subprocess.run(["ldd", path], env=env, check=True, capture_output=True,
                         text=True).stdout
    deps = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (not found|\S+)", line)
        if m:
            deps[m.group(1)] = None if m.group(2) == "not found" else os.path.realpath(m.group(2))
    return deps


def check_deps(path, libs, own, direct):
    deps = ldd(path)
    for soname, where in sorted(deps.items()):
        if where is None:
            check(False, "%s: %s not found" % (path, soname))
        elif os.path.dirname(where) == libs or where in own:
            pass
        elif soname not in SYSTEM:
            check(False, "%s: %s resolves to %s, outside the wheel (%s)" % (path, soname, where,
                                                                             libs))
    for name in direct:
        hit = [s for s, w in deps.items()
               if re.match(re.escape(name) + r"-[0-9a-f]{8}\.so", s) and w and w.startswith(libs)]
        check(hit, "%s: no grafted %s in %s" % (path, name, libs))
    return deps


def mapped_files():
    with open("/proc/self/maps") as f:
        return {line.split(None, 5)[5].strip() for line in f if " /" in line}


def main():
    site = sysconfig.get_paths()["purelib"]
    pkg = os.path.join(site, "stoker")
    libs = os.path.join(site, "stoker.libs")
    check(sys.prefix != sys.base_prefix, "not run in a venv (sys.prefix %s)" % sys.prefix)
    for k in ("STOKER_LIB", "PYTHONPATH", "LD_LIBRARY_PATH"):
        check(k not in os.environ, "%s is set" % k)
    # The interpreter's own libraries before the snapshot: libffi (ctypes) and
    # OpenSSL (_ssl, _hashlib, which torch's imports pull in).
    import ctypes, hashlib, ssl  # noqa: F401,E401
    before = mapped_files()
    import stoker
    from stoker import _build, _lib
    check(os.path.dirname(os.path.realpath(stoker.__file__)) == pkg,
          "stoker imported from %s, not %s" % (stoker.__file__, pkg))
    check(_build.BUNDLED, "the installed package does not say its library is bundled")
    lib = os.path.join(pkg, "libstoker.so.0")
    check(os.path.realpath(_lib.lib_path) == lib,
          "stoker._lib.lib_path is %s, not the wheel's %s" % (_lib.lib_path, lib))
    check(os.path.isdir(libs) and os.listdir(libs), "no %s" % libs)
    check(stoker.lib_version() == stoker.__version__,
          "libstoker %s, package %s" % (stoker.lib_version(), stoker.__version__))
    cli = os.path.join(pkg, "stoker")
    deps = check_deps(lib, libs, {lib}, DIRECT)
    check_deps(cli, libs, {lib}, DIRECT[:5] + CLI_DIRECT)
    # What importing stoker mapped: the grafted copies, never the system's.
    mapped = mapped_files()
    for soname, where in deps.items():
        m = re.match(r"(lib.+)-[0-9a-f]{8}(\.so.*)", soname)
        if m and where:
            base = m.group(1) + ".so"
            check(where in mapped, "%s is not mapped (%s loaded from elsewhere?)" % (where, soname))
            sysmaps = [p for p in mapped - before if os.path.basename(p).startswith(base)
                       and not p.startswith(libs)]
            check(not sysmaps, "importing stoker mapped the system's %s too" % ", ".join(sysmaps))
    out = subprocess.run(["stoker", "--version"], capture_output=True, text=True)
    check(out.returncode == 0 and out.stdout.split() == ["stoker", stoker.__version__],
          "`stoker --version` (%s) says %r %r" % (subprocess.run(
              ["sh", "-c", "command -v stoker"], capture_output=True, text=True).stdout.strip(),
              out.stdout, out.stderr))
    if errors:
        for e in errors:
            print("wheel_check: " + e, file=sys.stderr)
        sys.exit(1)
    print("wheel_check: stoker %s from %s; libstoker.so.0 and the CLI resolve %d libraries "
          "into %s (system: %s)" % (stoker.__version__, pkg, len(os.listdir(libs)), libs,
                                    " ".join(sorted(s for s in deps if s in SYSTEM))))


main()
