"""Markdown tables of bench/peers/run.sh's results (build/peers-results/*.json),
for docs/BENCHMARKS.md:  python3 bench/peers/table.py [DIR]"""
import json
import os
import sys

d = sys.argv[1] if len(sys.argv) > 1 else "build/peers-results"
for w in ("train", "raw-warm", "raw-cold", "val"):
    f = os.path.join(d, w + ".json")
    if not os.path.exists(f):
        continue
    try:
        with open(f) as fh:
            j = json.load(fh)
    except ValueError:
        print("\n**%s**: %s is not complete (a run still going, or one that failed: see %s.log)"
              % (w, f, w))
        continue
    print("\n**%s** (%s, %s cache, batch %d, prefetch %s, %d CPUs, %d rounds of %.0f s; load at the end %s)\n"
          % (w, j["mode"], j["cache"], j["batch_size"], j.get("prefetch", "-"), j["cpus"], j["rounds"],
             j["seconds"], " ".join(j["load"])))
    print("| loader | workers / threads | samples/s median (min–max) | CPU s / 1,000 | peak PSS MB | "
          "loader MB (above its imports) | start-up s | stoker (best source) / it | stoker's loader MB / it |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, e in j["results"].items():
        if "samples_per_s" not in e:
            why = e.get("error") or "flagged: %s" % e.get("flag")
            print("| %s | %s | %s | | | | | | |" % (label, e["workers"], why.replace("|", "/")[:200]))
            continue
        s = e["samples_per_s"]
        r = "**%.2f**" % e["ratio_best_stoker"] if "ratio_best_stoker" in e else ""
        m = "%.2f" % e["memory_ratio"] if "memory_ratio" in e else ""
        print("| %s | %d | %.0f (%.0f–%.0f) | %.2f | %.0f | %.0f | %.2f | %s | %s |" % (
            label, e["workers"], s["median"], s["min"], s["max"], e["cpu_s_per_1000"],
            e["pss_peak_mb"], e.get("loader_mb", 0), e.get("startup_s", e.get("ttfb_s", 0)), r, m))
    for name, m in j["conversions"].items():
        if "error" not in m:
            print("\nformat for %s: %.0f s, %.0f MB" % (name, m["seconds"], m["bytes"] / 1e6), end="")
    print()
    for s in j["skipped"]:
        print("\nskipped %s: %s" % (s["peer"], s["why"]))
    if j["versions"]:
        print("\nversions: " + ", ".join("%s %s" % kv for kv in j["versions"].items()))
