"""How the tests' torch.distributed ranks end: once every rank is past its
last collective, without tearing gloo down.  torch 2.x's teardown
(destroy_process_group, or the interpreter's exit with the group alive)
aborted once in CI with "terminate called without an active exception",
after the rank hosting the TCPStore had gone (the rank's work was done and
checked; not reproduced in 40 runs here).  Each rank marks that it returned
from the last barrier and exits when all have: a rank that exits before
the others return could take a message they still wait for."""

import os
import sys
import time


def leave(stem, rank, world, timeout=120):
    """Marks STEM.RANK, waits for STEM.0 .. STEM.(world-1), exits 0."""
    open("%s.%d" % (stem, rank), "w").close()
    deadline = time.monotonic() + timeout
    while not all(os.path.exists("%s.%d" % (stem, r)) for r in range(world)):
        if time.monotonic() > deadline:
            sys.exit("rank %d: the other ranks never returned from the last barrier" % rank)
        time.sleep(0.01)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
