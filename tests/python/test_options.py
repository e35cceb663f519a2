"""The option table is the one owner of every option's default and range:
docs/options.md, the CLI's --help and the Python keywords agree with it, an
out-of-range value is refused naming the option and its range in every front
end, and no front end writes a default or a range of its own."""

import ctypes
import inspect
import os
import re
import subprocess

import pytest

import stoker
from stoker import _lib
from stoker import options as options_doc

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
STOKER = os.environ.get("STOKER", os.path.join(ROOT, "build", "stoker"))
ROWS = _lib.OPTIONS


def test_docs_table_is_the_library_table():
    with open(os.path.join(ROOT, "docs", "options.md")) as f:
        assert f.read() == options_doc.markdown(), (
            "docs/options.md differs from the option table: regenerate it with "
            "`PYTHONPATH=python python3 -m stoker.options > docs/options.md`")


def test_table_rows_are_consistent():
    """Defaults parse, flags and choices default to the zero state (a zero C
    struct means the defaults), names are unique."""
    assert len(ROWS) == len({r.name for r in ROWS.values()})
    for r in ROWS.values():
        o = (_lib.LoaderOpts if r.group == _lib.OPT_LOADER else _lib.ImageOpts)()
        r.set(o, r.default, [])  # the default parses
        if r.type in (_lib.OPT_FLAG, _lib.OPT_NOFLAG, _lib.OPT_BITCHOICE):
            assert r.default == ("true" if r.type == _lib.OPT_NOFLAG else
                                 "false" if r.type == _lib.OPT_FLAG else r.choices[0]), r.name
            assert o.flags == 0, r.name
        if r.type == _lib.OPT_ENUM:
            assert r.default == r.choices[0], r.name
        assert r.help and not r.help.endswith("."), r.name


def test_cli_help_comes_from_the_table():
    out = subprocess.run([STOKER, "bench", "--help"], capture_output=True, text=True,
                         check=True).stdout
    # an entry's help wraps under 100 columns: its continuation lines (indented
    # to the help's column) joined back
    out = re.sub(r"\n {31}(?=\S)", " ", out)
    for r in ROWS.values():
        flag = ("--no-" if r.type == _lib.OPT_NOFLAG else "--") + r.name.replace("_", "-")
        line = next((ln for ln in out.splitlines()
                     if re.match(r"\s+(-\w, )?%s(\s|$)" % flag, ln)), None)
        assert line is not None, "stoker bench --help lacks %s" % flag
        assert r.help in line, (flag, line)
        if r.type not in (_lib.OPT_FLAG, _lib.OPT_NOFLAG) and r.default:
            assert "[%s]" % r.default in line, (flag, line)
        if r.min != r.max and r.type == _lib.OPT_DURATION:  # as durations are written
            assert "(%s..%s)" % (options_doc._duration(int(r.min)), options_doc._duration(int(r.max))) in line, line
        elif options_doc._is_size(r):  # sizes as sizes are written: "1..1 TiB"
            assert "(%s..%s" % (options_doc._size(r.min), options_doc._size(r.max)) in line, line
        elif r.min != r.max and r.type != _lib.OPT_ENUM:
            assert "%.17g..%.17g" % (r.min, r.max) in line, (flag, line)


def test_python_defaults_come_from_the_table():
    sig = inspect.signature(stoker.Loader.__init__)
    assert sig.parameters["batch_size"].default == ROWS["batch_size"].python_default()
    img = inspect.signature(stoker.Image.__init__).parameters
    for name, row in (("size", "width"), ("crop", "crop"), ("flip", "flip"),
                      ("layout", "layout"), ("dtype", "dtype"),
                      ("decode_threads", "decode_threads"), ("max_pixels", "max_pixels"),
                      ("crop_frac", "crop_frac")):
        assert img[name].default == ROWS[row].python_default(), name
    assert img["scale"].default == (ROWS["scale_min"].python_default(),
                                    ROWS["scale_max"].python_default())
    assert stoker.IMAGENET_MEAN == ROWS["mean"].python_default()
    im = stoker.Image()
    for attr, row in (("width", "width"), ("crop", "crop"), ("dtype", "dtype"),
                      ("max_pixels", "max_pixels")):
        assert str(getattr(im, attr)) == ROWS[row].default, attr


def test_loader_options_in_effect(folder):
    import torch
    with stoker.Loader(folder, 4, quiet=True) as l:
        got = l.options
    for r in ROWS.values():
        if r.group == _lib.OPT_LOADER and r.name not in ("batch_size", "io_threads",
                                                        "quiet", "rank", "world_size", "seed"):
            assert got[r.name] == r.default, r.name
    assert got["batch_size"] == "4" and got["io_threads"] != "auto"
    # Python's default seed is torch's (the C default, 0, is the CLI's)
    assert got["seed"] == str(torch.initial_seed())


@pytest.mark.parametrize("name,value", [("queue_depth", 10 ** 9), ("prefetch", 0),
                                        ("batch_size", 2 ** 21), ("shuffle_window", 0)])
def test_out_of_range_names_option_and_range_everywhere(folder, name, value):
    r = ROWS[name]
    rng = "%.17g..%.17g" % (r.min, r.max)
    # Python
    kw = {"batch_size": value} if name == "batch_size" else {name: value}
    args = (folder,) if name == "batch_size" else (folder, 4)
    with pytest.raises(ValueError) as ei:
        stoker.Loader(*args, **kw)
    assert name in str(ei.value) and (rng in str(ei.value) or "up to" in str(ei.value))
    # CLI: bad usage, exit 2, the flag and the range named
    flag = "--" + name.replace("_", "-")
    p = subprocess.run([STOKER, "bench", folder, flag, str(value), "--no-baseline"],
                       capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert flag in p.stderr and ("%.17g" % r.max) in p.stderr, p.stderr
    # C: stk_loader_create with the field set directly
    o = _lib.LoaderOpts(size=ctypes.sizeof(_lib.LoaderOpts))
    o.path = os.fsencode(folder)
    if value <= 0xFFFFFFFF:
        setattr(o, name, value)
        err = ctypes.create_string_buffer(512)
        h = ctypes.c_void_p()
        rc = _lib.stk_loader_create(ctypes.byref(h), ctypes.byref(o), err, len(err))
        if value == 0:
            assert rc == 0  # a zero field in C is the default
            _lib.stk_loader_destroy(h.value)
        else:
            assert rc < 0 and name in err.value.decode() and rng in err.value.decode()


def test_no_front_end_keeps_a_default_or_range():
    """The library's defaults and ranges are written nowhere else: no
    `name=<default>` in the Python package, no CLI table entry carrying a
    loader option's default or range, no literal default in src/ beside the
    option's field."""
    files = []
    for d, exts in (("python/stoker", (".py",)), ("tools", (".c", ".h")), ("src", (".c",))):
        for top, _, names in sorted(os.walk(os.path.join(ROOT, d))):
            for f in sorted(names):
                path = os.path.join(top, f)
                if f.endswith(exts) and not path.endswith("src/base/options.c"):
                    files.append(path)
    hits = []
    for row in ROWS.values():
        if row.type not in (_lib.OPT_U32, _lib.OPT_U64, _lib.OPT_FLOAT) or not row.default:
            continue
        if row.default in ("0", "1", "auto"):
            continue  # too common to say anything
        num = re.escape(row.default)
        cli = row.name.replace("_", "-")
        pats = [r"\b%s\s*=\s*%s\b" % (row.name, num),                  # Python kwarg
                r"\"%s\"\s*,.*\"%s\"" % (cli, num),                      # CLI table entry
                r"\b%s\s*=\s*%s[uf]?\s*;" % (row.name, num),             # C: x->field = def;
                r"\b%s\s*\?\s*[^:]*:\s*%s\b" % (row.name, num)]          # C: f ? f : def
        if row.max != row.min:
            pats.append(r"\b%s\b[^\n]*\b%s\b" % (row.name, re.escape("%.17g" % row.max)))
        for path in files:
            text = open(path, encoding="utf-8").read()
            for pat in pats:
                for m in re.finditer(pat, text):
                    line = text.count("\n", 0, m.start()) + 1
                    hits.append("%s:%d: %s" % (os.path.relpath(path, ROOT), line, m.group(0)))
    assert not hits, "defaults or ranges written outside the option table:\n" + "\n".join(hits)


def env_reads():
    """Every environment variable the sources read: the literal argument of
    getenv / secure_getenv / os.environ, and in a C file that passes getenv
    a variable (a table of names), each name-like literal of that file."""
    found = {}
    for d in ("src", "tools", "python/stoker"):
        for top, _, names in os.walk(os.path.join(ROOT, d)):
            for f in names:
                if not f.endswith((".c", ".h", ".py")):
                    continue
                path = os.path.join(top, f)
                text = open(path).read()
                lits = re.findall(r'(?:getenv|environ\.get|environ\[|environ\.setdefault)'
                                  r'\(?\s*"([A-Za-z_][A-Za-z0-9_]*)"', text)
                if f.endswith(".c") and re.search(r'getenv\((?!")', text):
                    lits += re.findall(r'"([A-Z][A-Z0-9]*_[A-Z0-9_]+)"', text)
                for n in lits:
                    found.setdefault(n, os.path.relpath(path, ROOT))
    return found


def test_every_environment_variable_is_documented():
    """docs/options.md's Environment table names every variable the library,
    the CLI and the package read (and the scan finds the known ones, so a
    scan that finds nothing fails)."""
    found = env_reads()
    for known in ("STOKER_NO_URING", "STOKER_NULL_CHANNELS", "STOKER_PAGE_CACHE_BYTES",
                  "STOKER_NO_PROGRESS", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "STOKER_LIB"):
        assert known in found, "the scan missed %s" % known
    with open(os.path.join(ROOT, "docs", "options.md")) as f:
        doc = f.read()
    env = doc[doc.index("## Environment"):]
    missing = ["%s (read in %s)" % (n, p) for n, p in sorted(found.items())
               if "`%s`" % n not in env]
    assert not missing, ("environment variables read but not in docs/options.md's "
                         "Environment table (python/stoker/options.py ENVIRONMENT): "
                         + ", ".join(missing))


def test_aliases_are_the_tables():
    """The alias column is the one place aliases live: stk_option_find takes
    each word alias for its row, Python takes it as a keyword, the CLI's
    short flags are its letters, and --sweep names the knob by it."""
    words = {a: r.name for r in _lib.OPTIONS.values() for a in r.aliases}
    assert {"qd": "queue_depth", "threads": "io_threads", "batch": "batch_size",
            "null_latency_ns": "null_latency"}.items() <= words.items()
    for alias, name in words.items():
        row = _lib.stk_option_find(alias.encode())
        assert row and row.contents.name.decode() == name
        assert _lib.stk_option_find(alias.replace("_", "-").encode())
    assert not _lib.stk_option_find(b"q"), "a letter is the CLI's, not a name"
    shorts = {r.short: r.name for r in _lib.OPTIONS.values() if r.short}
    assert shorts == {"b": "batch_size", "p": "prefetch", "q": "queue_depth",
                      "t": "io_threads", "e": "engine"}
    help_text = subprocess.run([os.environ["STOKER"], "bench", "--help"], capture_output=True,
                               text=True).stdout
    for letter, name in shorts.items():
        assert re.search(r"-%s, --%s\b" % (letter, name.replace("_", "-")), help_text), letter


# A value of the wrong type for each kind of option: a string or a number
# where a flag goes ('False' was true by truthiness), a bool or a float where
# an integer goes, and so on.
WRONG = {_lib.OPT_FLAG: ["False", "0", 0, 1, None], _lib.OPT_NOFLAG: ["false", "no", 1],
         _lib.OPT_U32: ["4", 2.5, True], _lib.OPT_U64: ["4", 2.5, True],
         _lib.OPT_FLOAT: ["0.5", True], _lib.OPT_FLOAT3: ["0.5", [True, 1, 1]],
         _lib.OPT_DURATION: [2.5, True], _lib.OPT_ENUM: [1, True],
         _lib.OPT_BITCHOICE: [1, True], _lib.OPT_STR: [5, True]}
# Image's keywords where they are not the table's names
IMAGE_KEYWORD = {"width": "size", "height": "size", "scale_min": "scale", "scale_max": "scale",
                 "ratio_min": "ratio", "ratio_max": "ratio", "mean": None, "std": None,
                 "normalize": None}


def test_every_option_checks_its_type(folder):
    """Every option of the table refuses a value of another type with a
    TypeError naming the option and the value's type, in Loader's keywords
    and Image's; a flag takes a bool or a numpy bool only."""
    np = pytest.importorskip("numpy")
    for name, row in ROWS.items():
        for bad in WRONG[row.type]:
            if bad == "4" and row.bit & _lib.OPT_BYTES:
                continue  # a size's text: "4" is 4 bytes (below)
            with pytest.raises(TypeError) as ei:
                _lib.option_text(row, bad)
            assert name in str(ei.value) and type(bad).__name__ in str(ei.value)
            if row.group == _lib.OPT_LOADER:
                kw = {"batch_size": bad} if name == "batch_size" else {name: bad}
                with pytest.raises(TypeError) as ei:
                    stoker.Loader(folder, *(() if name == "batch_size" else (4,)), **kw)
            else:
                key = IMAGE_KEYWORD.get(name, name)
                if key is None:
                    continue
                value = bad
                if key in ("scale", "ratio"):
                    value = (bad, 1.0) if name.endswith("_min") else (0.5, bad)
                elif key == "size":  # (height, width)
                    value = (bad, 8) if name == "height" else (8, bad)
                with pytest.raises(TypeError) as ei:
                    stoker.Image(**{key: value})
                assert key in str(ei.value)
            assert name in str(ei.value) and type(bad).__name__ in str(ei.value), str(ei.value)
    with stoker.Loader(folder, 4, shuffle=np.bool_(False), drop_last=np.True_) as l:
        assert l.options["shuffle"] == "false" and l.drop_last
    assert stoker.Image(flip=np.bool_(False)).flip is False


def test_binding_arguments_check_their_type(folder):
    """The binding's own arguments (not in the table) and the integers past
    their C field's width are refused the same way, naming the argument."""
    cases = [(dict(copy_free="False"), "copy_free"), (dict(copy_free=0), "copy_free"),
             (dict(copy_free="yes", sample_transform=len), "copy_free"),
             (dict(report_every="5"), "report_every"), (dict(report_every=True), "report_every"),
             (dict(sample_transform=len, transform_threads="4"), "transform_threads"),
             (dict(sample_transform=len, transform_threads=2.0), "transform_threads")]
    for kw, name in cases:
        with pytest.raises(TypeError, match=name):
            stoker.Loader(folder, 4, **kw)
    with pytest.raises(ValueError, match="report_every"):
        stoker.Loader(folder, 4, report_every=0)
    with pytest.raises(ValueError, match="transform_threads"):
        stoker.Loader(folder, 4, sample_transform=len, transform_threads=0)
    for seed in (2 ** 64, -1):
        with pytest.raises(ValueError, match=r"seed.*0\.\.18446744073709551615"):
            stoker.Loader(folder, 4, seed=seed)
    with pytest.raises(TypeError, match="path must be .*NoneType"):
        stoker.Loader(None, 4)
    with stoker.Loader(folder, 4) as l:
        with pytest.raises(TypeError, match="epoch"):
            l.set_epoch("1")


def test_dataloader_habits_and_misspellings(folder):
    """A DataLoader keyword says what stoker does instead, by keywords that
    exist; a misspelt one gets the nearest real name; neither lists every
    option."""
    from stoker import surface
    loader_kw = set(inspect.signature(stoker.Loader.__init__).parameters) | set(ROWS) | \
        {a for r in ROWS.values() for a in r.aliases}
    image_kw = set(inspect.signature(stoker.Image.__init__).parameters)
    for habit in ("num_workers", "pin_memory", "collate_fn", "sampler", "prefetch_factor"):
        assert habit in surface.HABITS
    for habit, hint in surface.HABITS.items():
        named = re.findall(r"(\w+)=", hint)
        assert named or habit == "persistent_workers", habit
        for name in named:
            assert name in loader_kw or name in image_kw, (habit, name)
        with pytest.raises(TypeError) as ei:
            stoker.Loader(folder, 4, **{habit: 1})
        assert habit in str(ei.value) and hint in str(ei.value)
        assert "affinity" not in str(ei.value), "not the list of every option"
    for typo, want in (("shufle", "shuffle"), ("drop_lst", "drop_last"), ("thread", "threads"),
                       ("sample_transfrom", "sample_transform"), ("batchsize", "batch_size")):
        with pytest.raises(TypeError, match="did you mean %s=" % want):
            stoker.Loader(folder, 4, **{typo: 1})
    with pytest.raises(TypeError) as ei:
        stoker.Loader(folder, 4, num_workers=8, zzqx=1)
    assert "num_workers" in str(ei.value) and "zzqx= is not an option\n" in str(ei.value)


def test_size_keywords_take_units(folder):
    """A size keyword takes bytes or text the library's one reader of sizes
    (stk_parse_size) reads: "64MiB" is 64 << 20, as on the command line;
    text that is no size is its ValueError, naming the option."""
    with stoker.Loader(folder, 4, slot_bytes="1MiB", read_bytes="4KB") as l:
        assert l.options["slot_bytes"] in ("1MiB", "1048576"), l.options["slot_bytes"]
        assert l.memory()["slot_bytes"] == 1 << 20
    with pytest.raises(ValueError, match="slot_bytes"):
        stoker.Loader(folder, 4, slot_bytes="64 mebibytes")
    with pytest.raises(TypeError, match="slot_bytes must be a number of bytes or a size"):
        stoker.Loader(folder, 4, slot_bytes=2.5)


def test_duration_keywords_take_units():
    """A duration keyword's text goes to the library's one reader of
    durations (stk_parse_duration): "1m" is 60 s, as on the command line."""
    o = _lib.LoaderOpts()
    for name, text, want in (("remote_timeout", "1m", "60s"), ("remote_timeout", "1.5s", "1500ms"),
                             ("remote_connect_timeout", "250ms", "250ms")):
        row = ROWS[name]
        row.set(o, _lib.option_text(row, text), [])
        assert row.get(o) == want, (name, text)
    with pytest.raises(ValueError, match="remote_timeout.*is not a duration"):
        ROWS["remote_timeout"].set(o, _lib.option_text(ROWS["remote_timeout"], "30 sec"), [])
