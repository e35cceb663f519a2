#!/bin/sh
# `make deb`: the Debian package, stoker_<version>_<arch>.deb in OUTDIR, built
# with debhelper (debian/) from a copy of the tree in WORK, so the tree itself
# stays clean; debian/changelog is written there from stoker.h's version (the
# one owner), dated by the last commit.  lintian must find no errors.  The
# copy's build folder is kept from one make deb to the next (make rebuilds what
# changed, as in the tree); everything else is copied afresh.
# usage: deb.sh VERSION WORK OUTDIR
set -eu
version=$1 work=$2 out=$3
src=$work/stoker-$version
if [ -d "$src/build" ]; then
	find "$work" -mindepth 1 -maxdepth 1 ! -name "stoker-$version" -exec rm -rf {} +
	find "$src" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
else
	rm -rf "$work" && mkdir -p "$src"
fi
tar -c --exclude=__pycache__ --exclude='*.pyc' --exclude=python/build \
	Makefile mk include src tools python debian README.md docs | tar -x -C "$src"
when=$(git log -1 --format=%cD 2>/dev/null || date -R)
rev=$(git describe --always --dirty 2>/dev/null || echo "no git")
maint=$(sed -n 's/^Maintainer: //p' debian/control)
cat >"$src/debian/changelog" <<EOC
stoker ($version) unstable; urgency=medium

  * stoker $version, built by make deb from the source tree ($rev).

 -- $maint  $when
EOC
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
deb=stoker_${version}_$arch.deb
# -nc: no `debian/rules clean` first, which would remove the kept build folder.
(cd "$src" && dpkg-buildpackage -b -nc -us -uc -j"${JOBS:-2}") >"$work/build.log" 2>&1 || {
	tail -n 40 "$work/build.log" >&2
	echo "stoker: dpkg-buildpackage failed (whole log: $work/build.log)" >&2
	exit 1
}
lintian --fail-on error --info "$work/$deb" >"$work/lintian.log" 2>&1 || {
	cat "$work/lintian.log" >&2
	echo "stoker: lintian finds errors in $work/$deb" >&2
	exit 1
}
[ -s "$work/lintian.log" ] && sed 's/^/  lintian: /' "$work/lintian.log"
mkdir -p "$out" && mv "$work/$deb" "$out/$deb"
echo "$out/$deb: install with: sudo apt install ./$deb"
