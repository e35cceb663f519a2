#!/bin/sh
# `make bench`: every comparison in this folder, one after the other, each
# printing its ratios against the reference it measures in the same run.
# Cold-cache parts need root.  Figures go to docs/BENCHMARKS.md by hand.
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
export STOKER="$(pwd)/$BUILD/stoker" BUILD
rc=0
run() { echo; echo "== $*"; "$@" || rc=1; }
run "$PYTHON" bench/loader_bench.py
run "$PYTHON" bench/image_bench.py
run env PYTHONPATH=python "$PYTHON" bench/python_vs_c.py
run "$PYTHON" bench/shards_bench.py
run sh bench/index_bench.sh
run sh bench/disk_vs_fio.sh "${BENCH_DIR:-/tmp}"
run sh bench/iostat_vs_sysstat.sh
run sh bench/gen_bench.sh
run env PYTHONPATH=python "$PYTHON" bench/ranks_bench.py   # torchrun-style ranks on one host
run sh bench/mpi_bench.sh                                 # mpirun -np 2, cold
run sh bench/gpu_check.sh   # says so and exits 0 without a GPU
exit $rc
