#!/bin/sh
# cli_symbols.sh — libstoker exports exactly its public API: every STK_API
# function of include/stoker/*.h is a defined dynamic symbol of
# libstoker.so.0 (`nm -D`), nothing else is (no stk__ internal, no helper of
# a dependency), and src/libstoker.map names exactly those functions.  The
# checker is first run on made-up symbol lists it must refuse, so a checker
# that passes everything fails here.  Run by tests/cli.sh with $STOKER set.
. "$(dirname "$0")/cli-common.sh"
lib=$(dirname "$S")/libstoker.so.0
[ -e "$lib" ] || fail "$lib is missing (make builds it)"
command -v nm >/dev/null 2>&1 || fail "nm is missing (Debian: binutils, which gcc brings)"

# defined dynamic symbols, one name a line (the version node and @@VERSION cut)
nm -D --defined-only --format=posix "$lib" >"$tmp/nm" 2>"$tmp/err" || fail "nm -D $lib: $(cat "$tmp/err")"

cat >"$tmp/check.py" <<'EOF'
import glob, os, re, sys

top, nm_file = sys.argv[1], sys.argv[2]
headers = sorted(os.path.basename(p) for p in glob.glob(top + "/include/stoker/*.h"))
api = {}
for h in headers:
    text = open("%s/include/stoker/%s" % (top, h)).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)  # no names from comments
    for m in re.finditer(r"\bSTK_API\b(?!\s*__)([^;(]*?)\b(stk_\w+)\s*\(", text):
        api[m.group(2)] = h
assert len(api) > 50, "only %d STK_API functions found: is the parser broken?" % len(api)

mapped = set()
body = re.sub(r"/\*.*?\*/", " ", open(top + "/src/libstoker.map").read(), flags=re.S)
m = re.search(r"global:(.*?)local:", body, re.S)
assert m, "src/libstoker.map: no global: ... local: section"
for tok in m.group(1).split(";"):
    tok = tok.strip()
    if not tok:
        continue
    assert re.fullmatch(r"stk_\w+", tok) and not tok.startswith("stk__"), \
        "src/libstoker.map: '%s' is not a public function's name (no wildcards)" % tok
    mapped.add(tok)

def problems(exported):
    out = []
    for n in sorted(api):
        if n not in exported:
            out.append("%s (STK_API in include/stoker/%s) is not exported: python3 mk/libmap.py > src/libstoker.map" % (n, api[n]))
    for n in sorted(exported):
        if n.startswith("stk__"):
            out.append("internal %s is exported" % n)
        elif n not in api:
            out.append("%s is exported but is no STK_API function of include/stoker/" % n)
    return out

exported = set()
for line in open(nm_file):
    f = line.split()
    if len(f) < 2 or f[1] in ("A",):  # the version node LIBSTOKER_0
        continue
    exported.add(f[0].split("@")[0])

# the checker must catch both faults before its verdict on the real list counts
one = sorted(api)[0]
assert any("is not exported" in p for p in problems(set(api) - {one})), "a missing export passed"
assert any("internal" in p for p in problems(set(api) | {"stk__loader_tick"})), "stk__ passed"
assert any("no STK_API" in p for p in problems(set(api) | {"jpeg_read_header"})), "a stray passed"
assert not problems(set(api))

bad = problems(exported)
bad += ["src/libstoker.map lacks %s" % n for n in sorted(set(api) - mapped)]
bad += ["src/libstoker.map names %s, which no header declares STK_API" % n
        for n in sorted(mapped - set(api))]
for p in bad:
    print("FAIL: " + p)
if bad:
    sys.exit(1)
print("ok: %d public functions exported, nothing else" % len(api))
EOF
/usr/bin/python3 "$tmp/check.py" "$top" "$tmp/nm" || fail "libstoker's exports (above)"
