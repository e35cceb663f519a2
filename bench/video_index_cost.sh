#!/bin/sh
# The video index (issue 38, items 2, 3 and 5): record bytes a packet and the
# cost of making it per video (tests/video_vindex.c) on stoker gen --video's
# set, on 10^4 small MP4s and 2,000 small MKVs (bench/video_index_cost.sh
# makes them with the ffmpeg CLI: 50 distinct 5 s 320x240 H.264 videos,
# copied), two rounds alternating; then a loader's create over the 10^4 with
# an empty and a kept index cache, and memory()'s decoders before the first
# batch.  Run under the exclusive lock:
#   flock -x /work/.measure.lock sh bench/video_index_cost.sh [GEN200 [DIR]]
# With REF=build/video_vindex_ref (tests/video_vindex.c linked with the
# earlier tree's vindex.c: `git show COMMIT:src/video/vindex.c >
# build/vindex_ref.c`, compiled to an object put before build/libstoker.a),
# each round runs both, alternating.
set -e
GEN=${1:-$HOME/.cache/stoker/video-gen200}
D=${2:-/tmp/vidx10k}
B=${BUILD:-build}
if [ ! -d "$D/mp4" ]; then
	mkdir -p "$D/src" "$D/mp4" "$D/mkv"
	for i in $(seq 0 49); do
		ffmpeg -loglevel error -f lavfi -i "testsrc2=size=320x240:rate=25,hue=H=$i" \
			-frames:v 125 -c:v libx264 -preset veryfast -g 50 -y "$D/src/m$i.mp4"
		ffmpeg -loglevel error -i "$D/src/m$i.mp4" -c copy -y "$D/src/k$i.mkv"
	done
	for c in $(seq 0 199); do for i in $(seq 0 49); do
		cp "$D/src/m$i.mp4" "$D/mp4/c${c}_$i.mp4"; done; done
	for c in $(seq 0 39); do for i in $(seq 0 49); do
		cp "$D/src/k$i.mkv" "$D/mkv/c${c}_$i.mkv"; done; done
fi
cat "$D"/mp4/* "$D"/mkv/* > /dev/null   # warm page cache
echo "load: $(uptime)"
# REF: the same program linked with another vindex.c (the tree before a
# change), alternated with this one's
REF=${REF:-}
for r in 1 2; do
	for bin in $B/video_vindex $REF; do
		echo "== round $r, $bin: gen200, load $(cut -d' ' -f1-3 /proc/loadavg)"
		find "$GEN" -type f | sort | "$bin"
		echo "== round $r, $bin: 10^4 MP4, load $(cut -d' ' -f1-3 /proc/loadavg)"
		find "$D/mp4" -type f | sort | "$bin"
		echo "== round $r, $bin: 2,000 MKV, load $(cut -d' ' -f1-3 /proc/loadavg)"
		find "$D/mkv" -type f | sort | "$bin"
	done
done
C=$(mktemp -d)
for what in empty kept; do
	echo "== loader create over 10^4 MP4, cache $what, load $(cut -d' ' -f1-3 /proc/loadavg)"
	STOKER_LIB=$B/libstoker.so.0 PYTHONPATH=python /usr/bin/python3 -c "
import sys, time, stoker
t = time.monotonic()
l = stoker.Loader('$D/mp4', 8, seed=0, cache_dir='$C', video=stoker.Video(frames=16, stride=2, size=224, decode_threads=2))
t1 = time.monotonic()
m = l.memory()
print('create %.2f s (%.2f ms a video); memory() before the first batch: decode_bytes %d (%d threads), meta_bytes %d, total %d' % (t1 - t, (t1 - t) * 1e3 / 10000, m['decode_bytes'], m['decode_threads'], m['meta_bytes'], m['total']))
"
done
rm -rf "$C"
echo "load: $(uptime)"
