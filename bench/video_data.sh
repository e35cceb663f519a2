#!/bin/sh
# bench/video_data.sh DIR [N] [stoker|ffmpeg] — the video set
# bench/video_bench.py measures (issue 38): N videos (default 200) in 10
# class folders (ImageFolder labels), 5-20 s, 360p-720p, 25 or 30 fps,
# H.264 (yuv420p) in MP4.  stoker (the default where the build has it):
# `stoker gen DIR --video` ($STOKER, default build/stoker: stk_video_make's
# moving gradients and frame numbers, 640x360 / 960x540 / 1280x720, a
# keyframe every 250 frames).  ffmpeg (the fallback): the ffmpeg CLI's
# testsrc2 source, libx264 -preset superfast -crf 23, 640x360 / 854x480 /
# 1280x720, keyframes every 50 or 250 frames; each video's parameters come
# from its number alone, so a remade set is the same set; two encoders at a
# time.
set -eu
DIR=${1:?usage: video_data.sh DIR [N]}
N=${2:-200}
ST=${STOKER:-build/stoker}
MAKER=${3:-stoker}
if [ "$MAKER" = stoker ] && [ -x "$ST" ] && "$ST" gen --help 2>&1 | grep -q -- '--video'; then
	exec "$ST" gen --video --classes 10 --count "$N" --seed 38 "$DIR"
fi
mkdir -p "$DIR"
command -v ffmpeg >/dev/null || { echo "video_data.sh: needs the ffmpeg CLI (apt-get install ffmpeg)"; exit 1; }
i=0
while [ "$i" -lt "$N" ]; do
	c=$((i % 10)); h=$(( (i * 7919) % 3 ))
	case $h in 0) s=640x360 ;; 1) s=854x480 ;; *) s=1280x720 ;; esac
	r=$(( (i / 3) % 2 == 0 ? 25 : 30 )); d=$(( 5 + (i * 37) % 16 )); g=$(( (i / 2) % 2 == 0 ? 50 : 250 ))
	mkdir -p "$DIR/class$c"
	f=$DIR/class$c/v$(printf %03d "$i").mp4
	if [ ! -s "$f" ]; then
		echo "ffmpeg -loglevel error -y -f lavfi -i testsrc2=size=$s:rate=$r:duration=$d -c:v libx264 -preset superfast -crf 23 -g $g -pix_fmt yuv420p -threads 1 -an -f mp4 $f.part && mv $f.part $f"
	fi
	i=$((i + 1))
done | xargs -P 2 -I{} sh -c '{}'
echo "video_data.sh: $N videos in $DIR"
