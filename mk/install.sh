#!/bin/sh
# `make install` / `make uninstall`.  Copies the built files under PREFIX
# (DESTDIR prepended, as usual) and records every file, link and folder it
# created in a manifest ($PREFIX/share/stoker/install-manifest), so that
# uninstall removes exactly those and nothing else, and an install over an
# older one removes what the older had and this one has not.  A prefix the
# user cannot write stops before anything is copied, with the command to use.
# usage: install.sh install|uninstall   (paths in the environment, from the Makefile)
set -eu
export LC_ALL=C
: "${BUILD:?}" "${PREFIX:?}" "${BINDIR:?}" "${LIBDIR:?}" "${INCLUDEDIR:?}" "${MANDIR:?}"
: "${PKGCONFIGDIR:?}" "${PYDIR:?}" "${VERSION:?}"
D=${DESTDIR:-}
manifest=$PREFIX/share/stoker/install-manifest

die() { echo "stoker: $*" >&2; exit 1; }

# Writable, or the first folder up that exists is writable (we would create the rest).
can_write() {
	p=$1
	while [ ! -e "$p" ]; do p=$(dirname "$p"); done
	[ -w "$p" ]
}

check_writable() { # ACTION DIR...
	act=$1; shift
	for dir in "$@"; do
		can_write "$D$dir" && continue
		cmd="make $act${MAKEARGS:+ $MAKEARGS}"
		{
			echo "stoker: cannot $act: $D$dir is not writable by $(id -un)."
			echo "As root:"
			echo "  sudo $cmd"
			echo "or under your home, without root:"
			echo "  make $act PREFIX=\$HOME/.local"
		} >&2
		exit 1
	done
}

# --- install -----------------------------------------------------------------

new=
created=
add() { new="$new$1 $2
"; }

mkdirs() { # DIR: creates it and each missing parent, remembering which
	[ -d "$D$1" ] && return 0
	# DESTDIR itself is the packager's, not part of the install.
	if [ "$1" = / ]; then mkdir -p "$D" && return 0; fi
	mkdirs "$(dirname "$1")"
	mkdir "$D$1"
	created="${created}d $1
"
}

put() { # MODE SRC DIR [NAME]
	mkdirs "$3"
	dst=$3/${4:-$(basename "$2")}
	install -m "$1" "$2" "$D$dst"
	add f "$dst"
}

do_install() {
	[ -e "$BUILD/stoker" ] && [ -e "$BUILD/libstoker.so.0" ] && [ -e "$BUILD/libstoker.a" ] ||
		die "nothing built in $BUILD: run make first"
	check_writable install "$BINDIR" "$LIBDIR" "$INCLUDEDIR" "$MANDIR" "$PKGCONFIGDIR" "$PYDIR" \
		"$(dirname "$manifest")"
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/stoker-install-XXXXXX")
	trap 'rm -rf "$tmp"' EXIT

	put 755 "$BUILD/stoker" "$BINDIR"
	put 644 "$BUILD/libstoker.so.0" "$LIBDIR"
	ln -sf libstoker.so.0 "$D$LIBDIR/libstoker.so"
	add l "$LIBDIR/libstoker.so"
	put 644 "$BUILD/libstoker.a" "$LIBDIR"
	for h in include/stoker/*.h; do put 644 "$h" "$INCLUDEDIR/stoker"; done

	# Static linking needs the libraries libstoker itself links (Libs.private);
	# the shared one needs nothing more.  Paths under PREFIX stay relative to it.
	rel() { case $1 in "$PREFIX"/*) echo "\${prefix}${1#"$PREFIX"}" ;; *) echo "$1" ;; esac; }
	cat >"$tmp/stoker.pc" <<-EOF
	prefix=$PREFIX
	libdir=$(rel "$LIBDIR")
	includedir=$(rel "$INCLUDEDIR")

	Name: stoker
	Description: keeps GPUs fed: io_uring data loader
	Version: $VERSION
	Libs: -L\${libdir} -lstoker
	Libs.private: ${LIBS_PRIVATE:-}
	Cflags: -I\${includedir}
	EOF
	put 644 "$tmp/stoker.pc" "$PKGCONFIGDIR"

	for py in python/stoker/*.py; do put 644 "$py" "$PYDIR/stoker"; done
	# What the installed package loads, and the version it must find there.
	cat >"$tmp/_build.py" <<-EOF
	# Written by \`make install\`: the libstoker this package was installed with.
	VERSION = "$VERSION"
	LIBDIR = "$LIBDIR"
	BUNDLED = False
	EOF
	put 644 "$tmp/_build.py" "$PYDIR/stoker"

	for m in "$BUILD"/man/*.1; do
		[ -e "$m" ] && put 644 "$m" "$MANDIR/man1"
	done

	# Over an older install: what it had and this one has not goes; the
	# folders it created stay ours.
	mkdirs "$(dirname "$manifest")"
	if [ -e "$D$manifest" ]; then
		grep '^d ' "$D$manifest" >"$tmp/olddirs" || true
		printf '%s' "$new" | sort >"$tmp/new"
		grep -v '^d ' "$D$manifest" | sort | comm -23 - "$tmp/new" >"$tmp/stale" || true
		while read -r kind path; do
			rm -f "$D$path"
			case $path in *.py) rm -f "$D$(dirname "$path")/__pycache__/$(basename "$path" .py)".*.pyc ;; esac
			echo "removed $path (from the older install)"
		done <"$tmp/stale"
		while read -r kind path; do
			[ -d "$D$path" ] && created="$created$kind $path
"
		done <"$tmp/olddirs"
	fi
	{
		printf '# stoker %s: installed by make install; make uninstall removes these\n' "$VERSION"
		printf '%s' "$new"
		printf 'f %s\n' "$manifest"
		printf '%s' "$created" | sort -u
	} >"$tmp/manifest"
	install -m 644 "$tmp/manifest" "$D$manifest"
	# Old folders no file needs any more (deepest first), then the loader cache.
	[ -e "$tmp/olddirs" ] && rmdirs "$tmp/manifest" quiet
	if [ -z "$D" ] && [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig || true; fi
	echo "stoker $VERSION installed under ${D}$PREFIX (list: $D$manifest)"
}

# --- uninstall ---------------------------------------------------------------

rmdirs() { # MANIFEST [quiet]: empty folders we created, deepest first
	grep '^d ' "$1" | cut -c3- | sort -r | while read -r dir; do
		[ -d "$D$dir" ] || continue
		if rmdir "$D$dir" 2>/dev/null; then :
		elif [ -z "${2:-}" ]; then echo "kept $D$dir: it holds files stoker did not install"
		fi
	done
}

do_uninstall() {
	[ -e "$D$manifest" ] || die "nothing to uninstall: no $D$manifest (make uninstall takes the PREFIX and DESTDIR that make install was given)"
	check_writable uninstall "$(dirname "$manifest")"
	list=$(grep -v '^#' "$D$manifest")
	# Paths in the manifest are absolute and under PREFIX (or LIBDIR, ... given
	# at install): never follow one elsewhere.
	printf '%s\n' "$list" | while read -r kind path; do
		case $path in /*) ;; *) die "$D$manifest: not an absolute path: $path" ;; esac
		case $path in *..*) die "$D$manifest: '..' in $path" ;; esac
	done
	printf '%s\n' "$list" | while read -r kind path; do
		case $kind in
		f | l)
			[ -e "$D$path" ] || [ -L "$D$path" ] || continue
			can_write "$(dirname "$D$path")" || check_writable uninstall "$(dirname "$path")"
			rm -f "$D$path"
			# Python's byte-code of an installed module goes with it.
			case $path in *.py)
				rm -f "$D$(dirname "$path")/__pycache__/$(basename "$path" .py)".*.pyc
				rmdir "$D$(dirname "$path")/__pycache__" 2>/dev/null || true ;;
			esac ;;
		esac
	done
	printf '%s\n' "$list" >"${TMPDIR:-/tmp}/stoker-uninstall.$$"
	rmdirs "${TMPDIR:-/tmp}/stoker-uninstall.$$"
	rm -f "${TMPDIR:-/tmp}/stoker-uninstall.$$"
	if [ -z "$D" ] && [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig || true; fi
	echo "stoker uninstalled from ${D}$PREFIX"
}

case "${1:-}" in
install) do_install ;;
uninstall) do_uninstall ;;
*) echo "usage: $0 install|uninstall" >&2; exit 2 ;;
esac
