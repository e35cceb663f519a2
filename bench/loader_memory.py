"""bench/loader_memory.py DIR [PREFETCH [BATCHES [READ_AREAS]]] — where a stoker loader's
memory goes, MB by MB (docs/BENCHMARKS.md, "The loader's own memory"): the
train workload (batch 256, RandomResizedCrop 224, uint8, 2 decode threads,
copy_free) run for BATCHES batches, then this process's anonymous PSS split
by mapping: the slot pool and the read areas (found by their sizes, from
Loader.memory()), the malloc heap and arenas (the index, the slots' records,
the decode threads' scratch, Python's objects), the rest (stacks, Python's
own mappings) — each against what Loader.memory() says, and the baseline
the same process had after its imports."""
import ctypes
import sys

import stoker


def anon_kb():
    """This process's anonymous + shared-memory PSS, kB."""
    kb = 0
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith(("Pss_Anon:", "Pss_Shmem:")):
                kb += int(line.split()[1])
    return kb


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)


def resident_kb(addr, size):
    """Resident kB of [addr, addr + size) (mincore); None if not all mapped."""
    page = 4096
    n = (size + page - 1) // page
    vec = ctypes.create_string_buffer(n)
    if _libc.mincore(addr, size, vec) != 0:
        return None
    return sum(b & 1 for b in vec.raw) * page // 1024


def main():
    path = sys.argv[1]
    prefetch = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    batches = int(sys.argv[3]) if len(sys.argv) > 3 else 24
    nareas = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    base = anon_kb()
    kw = {"prefetch": prefetch} if prefetch else {}
    img = stoker.Image(224, decode_threads=2, read_areas=nareas)
    peak, pool_at = 0, None
    with stoker.Loader(path, 256, image=img, shuffle=True, seed=0, copy_free=True, **kw) as ld:
        mem = ld.memory()
        n = 0
        while n < batches:
            for b in ld:
                n += 1
                # the pool's start: this slot's images less the slots before it
                pool_at = b.images.data_ptr() - b.slot * mem["slot_bytes"]
                peak = max(peak, anon_kb())
                if n >= batches:
                    break
        pool = resident_kb(pool_at, mem["pool_bytes"])
        # the read areas are mapped just before the pool: the address below
        # theirs (mmap hands out addresses downwards); checked, else not shown
        areas = resident_kb(pool_at + mem["pool_bytes"], mem["read_pool_bytes"]) \
            if mem["read_pool_bytes"] else 0
        end = anon_kb()
    MB = 1 / 1024.0  # MiB, as the peers harness counts
    print("prefetch %d, %d batches, batch 256 x 224 x 224 x 3 uint8 (%.1f MB a batch)" %
          (mem["nslots"], batches, 256 * 224 * 224 * 3 / 1e6))
    print("  anonymous PSS: peak %.1f MiB, after the imports %.1f MiB: the loader %.1f MiB at the "
          "peak, %.1f MiB at the end" % (peak * MB, base * MB, (peak - base) * MB, (end - base) * MB))
    print("  at the end:")
    print("  slot pool      %6.1f MiB resident  (memory(): %d x %.1f MiB = %.1f MiB)" %
          (pool * MB, mem["nslots"], mem["slot_bytes"] / 2**20, mem["pool_bytes"] / 2**20))
    print("  read areas     %6s MiB resident  (memory(): %d x %.1f MiB = %.1f MiB)" %
          ("%.1f" % (areas * MB) if areas is not None else "?", mem["read_areas"],
           mem["read_area_bytes"] / 2**20, mem["read_pool_bytes"] / 2**20))
    other = end - base - pool - (areas or 0)
    print("  the rest       %6.1f MiB           (memory(): index %.1f MiB, slot records %.1f MiB, "
          "decode %.1f MiB; malloc's arenas, thread stacks, Python's objects)" %
          (other * MB, mem["index_bytes"] / 2**20, mem["meta_bytes"] / 2**20,
           mem["decode_bytes"] / 2**20))


if __name__ == "__main__":
    sys.exit(main())
