#!/usr/bin/python3
"""Writes src/libstoker.map: every STK_API function of include/stoker/*.h by
name, nothing else exported.  Run it after adding a public function:
    python3 mk/libmap.py > src/libstoker.map
(tests/cli_symbols.sh fails while the map, the headers and nm -D disagree)."""
import glob
import os
import re

top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# every public header, stoker.h first
HEADERS = sorted((os.path.basename(p)[:-2] for p in
                  glob.glob(os.path.join(top, "include", "stoker", "*.h"))),
                 key=lambda h: (h != "stoker", h))
out = ["/* libstoker's exported symbols, by name: every STK_API function of",
       " * include/stoker/*.h and nothing else (stk__ internals stay local).",
       " * Written by mk/libmap.py; tests/cli_symbols.sh fails when this list,",
       " * the headers and `nm -D libstoker.so` disagree. */",
       "LIBSTOKER_0 {", "\tglobal:"]
for h in HEADERS:
    text = open(os.path.join(top, "include", "stoker", h + ".h")).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    names = sorted(set(m.group(2) for m in re.finditer(
        r"\bSTK_API\b(?!\s*__)([^;(]*?)\b(stk_\w+)\s*\(", text)))
    out.append("\t\t/* stoker/%s.h */" % h)
    out += ["\t\t%s;" % n for n in names]
out += ["\tlocal:", "\t\t*;", "};"]
print("\n".join(out))
