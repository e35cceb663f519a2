#!/bin/sh
# Checks the Debian packages a step needs.  As root, installs what is missing;
# otherwise stops with the exact apt-get line.
# usage: deps.sh build|install|deb|test|bench|fuzz
set -e
build="gcc make pkg-config liburing-dev libjpeg62-turbo-dev libpng-dev libwebp-dev libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev libavformat-dev libavcodec-dev libswscale-dev libavutil-dev"
install="$build help2man"
deb="$install build-essential debhelper dh-python dpkg-dev lintian python3"
# the tests also build the .deb and pip-install the Python package into a venv
# (and mk/venvs.sh pip's packages into theirs: python3-venv, ca-certificates);
# prometheus: promtool, and a server of the test's own for the Grafana queries;
# python3-av: PyAV on Debian's FFmpeg, the reference of the video pixel test
test="$deb g++ libcmocka-dev librsvg2-bin python3-pytest python3-numpy python3-torch python3-torchvision \
	python3-pil python3-av python3-venv python3-pip python3-setuptools python3-wheel ca-certificates \
	libopenmpi-dev openmpi-bin prometheus nginx-light openssl \
	libavformat59 libavcodec59 libswscale6 libavutil57"
bench="$test fio sysstat"
# make fuzz: clang's libFuzzer and sanitizer runtimes (Debian 12's clang is 14)
fuzz="clang libclang-rt-14-dev"
case "$1" in
build) want=$build ;;
install) want=$install ;;
deb) want=$deb ;;
test) want=$test ;;
bench) want=$bench ;;
fuzz) want=$fuzz ;;
*) echo "usage: $0 build|install|deb|test|bench|fuzz" >&2; exit 2 ;;
esac
missing=
for p in $want; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	echo "stoker: installing missing Debian packages:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq || true
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
	# cli_grafana starts a prometheus of its own: not the packaged service
	case " $missing " in *" prometheus "*)
		systemctl disable --now prometheus >/dev/null 2>&1 || true ;; esac
	exit 0
fi
echo "stoker: missing Debian packages. Install them with:" >&2
echo "  sudo apt-get install -y$missing" >&2
exit 1
