"""layers.py — the tree's one-way rule, checked (tests/cli_layers.sh runs it).

src/ and tools/ are cut into folders, each a layer (LAYERS, bottom first).
A file may include, and call, only its own folder and the folders below it;
and no two files may call each other, directly or round a loop, even inside
one folder.  Two graphs are read:

- includes: every `#include "folder/file.h"` of src/*/* and tools/*/*
  (a quoted include must name its folder, so the layer is plain to see);
- calls: from the object files (`nm`): a file uses a symbol another defines.

Usage: python3 tests/layers.py TOP BUILD   (TOP: the tree; BUILD: its build
folder with src/ and tools/ objects).  `--self-test` runs the checks on
made-up trees they must refuse first.
"""

import os
import re
import subprocess
import sys

# Bottom first.  A folder's files may use the folders before it in its list.
LAYERS = {
    "src": ["base", "io", "sys", "dataset", "sampler", "image", "video", "loader", "metrics"],
    # tools/*.c (one-file commands and main.c) are the top: ""
    "tools": ["common", "gen", "disk", "doctor", "bench", ""],
}


def layer_of(top, rel):
    """(tree, rank) of a file path relative to the tree's root."""
    parts = rel.split("/")
    tree = parts[0]
    folder = parts[1] if len(parts) > 2 else ""
    order = LAYERS[tree]
    if folder not in order:
        return tree, None
    return tree, order.index(folder)


def include_problems(files):
    """files: {relpath: text}.  The includes that point up a layer, or name
    no folder, and include circles."""
    bad = []
    edges = {}
    for rel, text in sorted(files.items()):
        tree, rank = layer_of(None, rel)
        if rank is None:
            bad.append("%s: in no layer of %s (add its folder to tests/layers.py's LAYERS)"
                       % (rel, tree))
            continue
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            inc = m.group(1)
            if inc.startswith("stoker/"):
                continue  # the public API: every layer may use it
            if tree == "tools" and inc.startswith("fuzz/"):
                continue
            if "/" not in inc:
                bad.append('%s: #include "%s" names no folder' % (rel, inc))
                continue
            target = "%s/%s" % (tree, inc)
            if target not in files:
                bad.append('%s: #include "%s": no such file in %s/' % (rel, inc, tree))
                continue
            edges.setdefault(rel, set()).add(target)
            _, trank = layer_of(None, target)
            if trank is not None and trank > rank:
                bad.append('%s: #include "%s" points up a layer (%s above %s)'
                           % (rel, inc, LAYERS[tree][trank] or "tools/", LAYERS[tree][rank]
                              or "tools/"))
    bad += ["include circle: " + " -> ".join(c) for c in circles(edges)]
    return bad


def call_problems(objs):
    """objs: {relpath of the source: (defined symbols, undefined symbols)}.
    Calls up a layer, and circles between files."""
    owner = {}
    for rel, (defs, _) in objs.items():
        for s in defs:
            owner[s] = rel
    bad = []
    edges = {}
    for rel, (_, uses) in sorted(objs.items()):
        tree, rank = layer_of(None, rel)
        for s in sorted(uses):
            tgt = owner.get(s)
            if tgt is None or tgt == rel:
                continue
            edges.setdefault(rel, {}).setdefault(tgt, s)
            ttree, trank = layer_of(None, tgt)
            if ttree != tree:  # tools/ on libstoker: its public API only
                if tree == "tools" and s.startswith("stk__"):
                    bad.append("%s calls %s of %s, not in the public API" % (rel, s, tgt))
                continue
            if rank is not None and trank is not None and trank > rank:
                bad.append("%s calls %s of %s, a layer up" % (rel, s, tgt))
    plain = {a: set(b) for a, b in edges.items()}
    for c in circles(plain):
        hops = ["%s (%s)" % (c[i], edges[c[i]][c[i + 1]]) for i in range(len(c) - 1)]
        bad.append("call circle: " + " -> ".join(hops) + " -> " + c[-1])
    return bad


def circles(edges):
    """One loop through each strongly connected group of more than one node
    (Tarjan), as a list of nodes ending where it started."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(loop_in(edges, set(group)))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def loop_in(edges, group):
    """A shortest loop from the group's first node back to it, inside it."""
    start = min(group)
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(edges.get(v, ())):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in group and w not in prev:
                prev[w] = v
                queue.append(w)
    return sorted(group)


def read_tree(top):
    files = {}
    for tree in LAYERS:
        for d, _, names in os.walk(os.path.join(top, tree)):
            for n in names:
                if n.endswith((".c", ".h")):
                    p = os.path.join(d, n)
                    files[os.path.relpath(p, top)] = open(p, encoding="utf-8").read()
    return files


def read_objs(top, build, files):
    objs = {}
    for rel in files:
        if not rel.endswith(".c"):
            continue
        o = os.path.join(build, rel[:-2] + ".o")
        if not os.path.exists(o):
            raise SystemExit("%s is missing: build first (make)" % o)
        out = subprocess.run(["nm", "--format=posix", o], capture_output=True, text=True,
                             check=True).stdout
        defs, uses = set(), set()
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 2 and f[1] in "TDBRCV":
                defs.add(f[0])
            elif len(f) >= 2 and f[1] == "U":
                uses.add(f[0])
        objs[rel] = (defs, uses)
    return objs


def self_test():
    """Made-up trees each check must refuse, and one it must pass."""
    ok = {"src/base/a.h": "", "src/loader/b.c": '#include "base/a.h"\n',
          "tools/common/c.h": "", "tools/x.c": '#include "common/c.h"\n'}
    assert include_problems(ok) == [], include_problems(ok)
    up = {"src/base/a.c": '#include "loader/b.h"\n', "src/loader/b.h": ""}
    assert any("points up a layer" in b for b in include_problems(up))
    bare = {"src/base/a.c": '#include "b.h"\n', "src/base/b.h": ""}
    assert any("names no folder" in b for b in include_problems(bare))
    loop = {"src/base/a.h": '#include "base/b.h"\n', "src/base/b.h": '#include "base/a.h"\n'}
    assert any("include circle" in b for b in include_problems(loop))
    calls = {"src/loader/a.c": ({"f"}, {"g"}), "src/loader/b.c": ({"g"}, {"h"}),
             "src/loader/c.c": ({"h"}, {"f"})}
    got = call_problems(calls)
    assert len(got) == 1 and "call circle" in got[0] and "(g)" in got[0], got
    upcall = {"src/io/a.c": ({"f"}, {"g"}), "src/loader/b.c": ({"g"}, set())}
    assert any("a layer up" in b for b in call_problems(upcall))
    private = {"tools/x.c": (set(), {"stk__g"}), "src/base/b.c": ({"stk__g"}, set())}
    assert any("not in the public API" in b for b in call_problems(private))
    fine = {"src/loader/a.c": ({"f"}, {"g"}), "src/io/b.c": ({"g"}, {"h"}),
            "src/base/c.c": ({"h"}, set())}
    assert call_problems(fine) == []


def main():
    self_test()
    if sys.argv[1:] == ["--self-test"]:
        return 0
    top, build = sys.argv[1], sys.argv[2]
    files = read_tree(top)
    bad = include_problems(files) + call_problems(read_objs(top, build, files))
    for b in bad:
        print("FAIL: " + b)
    print("%d files, %d problems" % (len(files), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
