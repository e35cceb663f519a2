"""stoker.cpu_share(): a rank's share of its host's CPUs, as libstoker
computes it for the loader's default threads and their affinity (the one
rule: stk_cpu_share in src/sys/cpushare.c; `stoker doctor` prints the same)."""

import ctypes

from . import _lib


def cpu_share(local_rank=None, local_world_size=None):
    """This process's share of the host's CPUs as a loader would take it.

    The ranks on the host (local_world_size, else LOCAL_RANK /
    LOCAL_WORLD_SIZE from torchrun, else Open MPI's OMPI_COMM_WORLD_LOCAL_*)
    divide the CPUs of the cgroup's cpuset that the affinity mask allows,
    within the cgroup's cpu.max quota; one CPU of the share is left to the
    training thread.  Returns a dict: local_rank, local_world_size, source,
    host_cpus, allowed, quota, bound, cpus, io_threads, decode_threads,
    trainer_cpu, oversubscribed, cpulist (where the loader's threads run; ""
    when nothing is pinned)."""
    if local_world_size is None and local_rank is not None:
        raise ValueError("local_rank needs local_world_size")
    lr = 0 if local_rank is None else local_rank
    lw = 0 if local_world_size is None else local_world_size
    for name, v in (("local_rank", lr), ("local_world_size", lw)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 0xFFFFFFFF:
            raise ValueError("%s must be an integer in 0..4294967295, not %r" % (name, v))
    st = _lib.CpuShare(size=ctypes.sizeof(_lib.CpuShare))
    err = ctypes.create_string_buffer(256)
    rc = _lib.stk_cpu_share(lr, lw, ctypes.byref(st), err, len(err))
    if rc < 0:
        raise ValueError(err.value.decode("utf-8", "replace") or _lib.strerror(rc))
    return st.as_dict()
