#!/usr/bin/env python3
"""Video clips beside PyAV, torchcodec, decord, DALI's CPU reader and the
FFmpeg-alone ceiling (issue 38): python/stoker/vs_video.py run from the
source tree, what `stoker bench DIR --video --vs all` runs.  Run it with the
peers' venv (bench/peers/setup.sh av torchcodec decord dali):

    make && sh bench/video_data.sh ~/.cache/stoker/video-200
    STOKER_LIB=build/libstoker.so.0 PYTHONPATH=python \\
      ~/.cache/stoker/peers/bin/python bench/video_bench.py ~/.cache/stoker/video-200 \\
      --rounds 5 --seconds 20 --ramp 4 --out build/video-results.json

The workload, the clip list the peers share, the ceiling and the memory
rule are described at the top of python/stoker/vs_video.py.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
# the runs are processes of their own (python -m stoker.vs_video): the same tree
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.join(ROOT, "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

from stoker.vs_video import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
