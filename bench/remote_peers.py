#!/usr/bin/env python3
"""The peers' side of bench/remote_bench.py, run in the peers' virtual
environment (bench/peers/setup.sh: PyTorch 2.x, Mosaic Streaming, LitData,
WebDataset, boto3).  One JSON argument, one JSON line out.

  {"convert": "mds"|"litdata", "source": IMAGE_FOLDER, "out": DIR}
      the folder's JPEGs (ImageFolder order and labels) in the peer's own
      format, 16 MB chunks like the stoker shards they are compared with
  {"peer": "wds"|"streaming"|"litdata", "source": URL, "cache": DIR,
   "workers": N, "batch": B, "samples": N}
      epoch 1 read from the server: the clock starts before the dataset is
      made (listing, index, first downloads included) and stops when the
      epoch's N samples are in; raw bytes, no decode: {"samples", "bytes",
      "seconds"}

Credentials and the endpoint come from the environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL; Streaming reads S3_ENDPOINT_URL).
A failure prints its error on stderr and exits 1."""
import json
import os
import sys
import time


def images(folder):
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    for label, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(folder, c))):
            yield os.path.join(folder, c, f), label


def read(path):
    with open(path, "rb") as f:
        return f.read()


def lit_item(item):
    path, label = item
    return {"jpg": read(path), "cls": label}


def convert(s):
    if s["convert"] == "mds":
        from streaming import MDSWriter
        with MDSWriter(out=s["out"], columns={"jpg": "bytes", "cls": "int"},
                       size_limit="16mb") as w:
            for path, label in images(s["source"]):
                w.write({"jpg": read(path), "cls": label})
    else:
        import litdata
        litdata.optimize(fn=lit_item, inputs=list(images(s["source"])), output_dir=s["out"],
                         chunk_bytes="16MB", num_workers=1, mode="overwrite")


def collate(items):
    return items


def lit_collate(items):
    # its items hold memoryviews, which the workers' pipe cannot pickle
    return [bytes(x["jpg"]) for x in items]


def epoch_wds(s):
    import webdataset as wds
    ds = (wds.WebDataset(s["source"], shardshuffle=100, seed=0, empty_check=False,
                         nodesplitter=wds.split_by_node, workersplitter=wds.split_by_worker)
          .shuffle(1000).to_tuple("jpg", "cls").batched(s["batch"], collation_fn=collate))
    for batch in wds.WebLoader(ds, batch_size=None, num_workers=s["workers"]):
        yield len(batch), sum(len(x[0]) for x in batch)


def epoch_streaming(s):
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory
    from torch.utils.data import DataLoader
    clean_stale_shared_memory()
    ds = StreamingDataset(remote=s["source"], local=s["cache"], shuffle=True, shuffle_seed=0,
                          batch_size=s["batch"])
    for batch in DataLoader(ds, batch_size=s["batch"], num_workers=s["workers"],
                            collate_fn=collate):
        yield len(batch), sum(len(x["jpg"]) for x in batch)


def epoch_litdata(s):
    import litdata
    from litdata.streaming import downloader
    # its obstore path refuses a plain-HTTP endpoint ("builder error": no
    # allow_http); boto3 is LitData's own other path, as without obstore
    downloader._OBSTORE_AVAILABLE = False
    opts = {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}
    ds = litdata.StreamingDataset(s["source"], shuffle=True, seed=0, cache_dir=s["cache"],
                                  storage_options=opts)
    dl = litdata.StreamingDataLoader(ds, batch_size=s["batch"], num_workers=s["workers"],
                                     collate_fn=lit_collate)
    for batch in dl:
        yield len(batch), sum(len(x) for x in batch)


def main():
    s = json.loads(sys.argv[1])
    try:
        if s.get("convert"):
            t0 = time.monotonic()
            convert(s)
            print(json.dumps({"seconds": time.monotonic() - t0}), flush=True)
            return 0
        import torch
        torch.set_num_threads(1)
        gen = {"wds": epoch_wds, "streaming": epoch_streaming, "litdata": epoch_litdata}[s["peer"]]
        t0 = time.monotonic()
        n = nbytes = 0
        for c, b in gen(s):
            n += c
            nbytes += b
            if n >= s["samples"]:  # the epoch's samples are in: its end is not waited for
                break              # (LitData's loader was seen never to end its first epoch)
        print(json.dumps({"samples": n, "bytes": nbytes, "seconds": time.monotonic() - t0}),
              flush=True)
        return 0
    except Exception as e:  # the caller prints it and goes on with the others
        print("%s: %s" % (type(e).__name__, str(e)[-800:]), file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # DataLoader workers and download threads end with the process
