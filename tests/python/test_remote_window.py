"""Windows: with the local cache on, a read that misses fetches the 8 MiB
window of its object around it into the cache (io/http.c), and every miss in
that window waits for it, so an epoch costs a request per window instead of
one per member.  The bytes are those of the shards on local disk, every
sample once, through faults (SlowDown, 500, resets, truncated bodies) too;
the order of shard mode and ranks is local disk's; a dataset the cache
cannot keep twice over (global shuffle) is read a member a request.

The shards here have no index beside them: the index build's own reads
would fill the cache (dataset/remote.c), so each test builds the index
first with the byte cache off (indexed), then reads with the cache folder's
index and an empty byte cache, the case of shards packed with their index."""

import os

import pytest  # noqa: F401 (fixtures)
import stoker

from remote_servers import FaultProxy
from test_remote import aws, data, read_all, reference, s3  # noqa: F401 (fixtures)
from test_remote import fault_plan, order_of


def indexed(path):
    """The cache folder path with the shards' index in it, no bytes."""
    with stoker.Loader("s3://bkt/ds/", batch_size=8, cache_dir=str(path), remote_cache=False,
                       quiet=True):
        pass
    assert not os.path.isdir(path / "remote") or not os.listdir(path / "remote")
    return str(path)


def test_an_epoch_costs_a_request_per_window(aws, tmp_path, data, reference):
    _, names = data
    got, rs, seen = read_all("s3://bkt/ds/", cache_dir=indexed(tmp_path), seed=4)
    assert got == reference and set(seen.values()) == {1}
    # the listing and a window per (1 MiB) shard, a member now and then that
    # runs past its window's end: far from a request per member
    assert rs["requests"] <= 1 + 2 * len(names) < len(reference)
    assert rs["failed"] == 0
    assert rs["window"] == 8 << 20 and 0 < rs["windows"] <= len(names)
    # the misses that joined a window before its stream passed them were
    # filled from the stream (the rest came from the cache after it)
    assert 0 < rs["streamed"] <= rs["cache_misses"]


def test_windows_through_faults_deliver_the_right_bytes(aws, tmp_path, s3, reference):
    proxy = FaultProxy(s3.port, fault_plan)
    try:
        aws.setenv("AWS_ENDPOINT_URL", proxy.url)
        got, rs, seen = read_all("s3://bkt/ds/", cache_dir=indexed(tmp_path),
                                 on_error="fail", seed=11)
    finally:
        proxy.close()
    assert got == reference and set(seen.values()) == {1}
    assert rs["retries"] > 0 and rs["failed"] == 0 and rs["windows"] > 0
    assert sum(proxy.faults.get(f, 0) for f in ("slowdown", "500", "reset", "truncate")) > 0


def test_shard_mode_and_ranks_with_windows_match_local_disk(aws, tmp_path, data):
    d, _ = data
    for rank in range(2):
        kw = dict(shuffle_mode="shard", rank=rank, world_size=2, seed=5)
        remote = order_of("s3://bkt/ds/", cache_dir=indexed(tmp_path / str(rank)), **kw)
        assert remote == order_of(str(d / "shards"), **kw)


def test_a_dataset_the_cache_cannot_keep_is_read_a_member_a_request(aws, tmp_path,
                                                                    reference):
    # 9 MB of shards, a 4 MiB cache: windows would be evicted before their
    # other members are read (global shuffle): none
    got, rs, _ = read_all("s3://bkt/ds/", cache_dir=indexed(tmp_path), cache_limit=4 << 20,
                          seed=3)
    assert got == reference
    assert rs["requests"] >= len(reference)
    # and STOKER_REMOTE_WINDOW=0 turns them off whatever the cache
    aws.setenv("STOKER_REMOTE_WINDOW", "0")
    got, rs, _ = read_all("s3://bkt/ds/", cache_dir=indexed(tmp_path / "b"), seed=3)
    assert got == reference and rs["requests"] >= len(reference)
    assert os.path.isdir(tmp_path / "b" / "remote")


def test_the_verdict_over_windows_says_what_they_cost(aws, s3, tmp_path):
    """+50 ms a request: the epoch waits on windows, and the network-bound
    verdict says so with their figures (requests, MB each, windows at once
    against the cap, the misses filled from the stream), though most reads
    were hits of what a window had just brought."""
    proxy = FaultProxy(s3.port, latency_s=0.05)
    try:
        aws.setenv("AWS_ENDPOINT_URL", proxy.url)
        with stoker.Loader("s3://bkt/ds/", batch_size=8, queue_depth=8, quiet=True,
                           cache_dir=indexed(tmp_path)) as l:
            for _ in l:
                pass
            v = l.diagnose(0)
            rs = l.remote_stats()
    finally:
        proxy.close()
    assert rs["windows"] > 0
    assert v["kind"] == "network-bound", v
    for words in ("requests, ", "MB each", "windows, ", "of 16 at once at most", "ms p50",
                  "filled from the stream", "the object store"):
        assert words in v["evidence"], (words, v["evidence"])
    assert "MiB a request (STOKER_REMOTE_WINDOW)" in v["try"], v["try"]


def test_small_windows_read_ahead_and_deliver_local_disks_order(aws, tmp_path, data):
    # 256 KiB windows: several to a shard, each miss's window queues the
    # next (read ahead, no reads waiting on it yet); shard mode's order and
    # bytes are local disk's, every window fetched once
    d, names = data
    aws.setenv("STOKER_REMOTE_WINDOW", str(256 << 10))
    kw = dict(shuffle_mode="shard", seed=7)
    with stoker.Loader("s3://bkt/ds/", batch_size=8, quiet=True, cache_dir=indexed(tmp_path),
                       **kw) as l:
        remote = []
        for data_, offsets, sizes, labels, indices in l:
            for k in range(len(indices)):
                o, n = int(offsets[k]), int(sizes[k])
                remote.append((int(indices[k]), int(labels[k]),
                               bytes(data_[o:o + n].numpy())))
        rs = l.remote_stats()
    assert remote == order_of(str(d / "shards"), **kw)
    total = sum((os.path.getsize(d / "shards" / n) + (256 << 10) - 1) // (256 << 10)
                for n in names)
    assert rs["window"] == 256 << 10 and len(names) < rs["windows"] <= total
