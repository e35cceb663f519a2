"""libstoker's option table, for people: `python3 -m stoker.options` prints it
as docs/options.md has it (a test regenerates that file and compares)."""

import ctypes

from . import _lib

_TYPES = {_lib.OPT_U32: "integer", _lib.OPT_U64: "integer", _lib.OPT_FLOAT: "number",
          _lib.OPT_FLOAT3: "3 numbers", _lib.OPT_DURATION: "duration", _lib.OPT_STR: "text",
          _lib.OPT_ENUM: "choice", _lib.OPT_FLAG: "flag", _lib.OPT_NOFLAG: "flag",
          _lib.OPT_BITCHOICE: "choice"}


def _num(x):
    return "%d" % x if x == int(x) and abs(x) < 1e15 else "%g" % x


def _is_size(row):
    return row.type == _lib.OPT_U64 and row.bit & _lib.OPT_BYTES


def _size(x):
    """1099511627776 -> "1 TiB", as `stoker --help` writes a size's range: the
    library's stk_fmt_ibytes."""
    buf = ctypes.create_string_buffer(32)
    return _lib.stk_fmt_ibytes(buf, len(buf), float(x)).decode()


def _duration(ns):
    for div, unit in ((10**9, "s"), (10**6, "ms"), (10**3, "us")):
        if ns and ns % div == 0:
            return "%d%s" % (ns // div, unit)
    return "%d" % ns


def _cli(row):
    flag = "--" + row.name.replace("_", "-")
    if row.type == _lib.OPT_NOFLAG:
        flag = "--no-" + row.name.replace("_", "-")
    return flag + ("`, `-" + row.short if row.short else "")


def _name(row):
    return "`%s`" % row.name + "".join(" (`%s`)" % a for a in row.aliases)


def _values(row):
    if row.type in (_lib.OPT_ENUM, _lib.OPT_BITCHOICE):
        return " \\| ".join("`%s`" % c for c in row.choices)
    if row.type in (_lib.OPT_FLAG, _lib.OPT_NOFLAG):
        return "`true` \\| `false`"
    if row.min != row.max and row.type == _lib.OPT_DURATION:
        return "%s..%s" % (_duration(int(row.min)), _duration(int(row.max)))
    if row.min != row.max:
        text = "%s..%s" % ((_size(row.min), _size(row.max)) if _is_size(row) else
                           (_num(row.min), _num(row.max)))
        if row.choices:
            text += ", or `%s` (0)" % row.choices[0]
        return text
    return "size" if _is_size(row) else _TYPES[row.type]


# Every environment variable stoker reads (the library, the CLI, the Python
# package), with who reads it; tests/python/test_options.py checks that the
# sources read no other.  Options belong in the option table: these are the
# launcher's, the user's folders, and test and diagnosis switches.
ENVIRONMENT = [
    ("RANK, WORLD_SIZE", "library",
     "this process's rank and the job's size when world_size is auto (torchrun)"),
    ("OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE", "library, CLI",
     "the same from Open MPI's mpirun; the CLI's `--mpi` runs read the size"),
    ("LOCAL_RANK, LOCAL_WORLD_SIZE", "library",
     "the ranks sharing this host's CPUs when local_world_size is auto (torchrun)"),
    ("OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE", "library, CLI", "the same from Open MPI"),
    ("XDG_CACHE_HOME, HOME", "library",
     "the cache folder: $XDG_CACHE_HOME/stoker, else ~/.cache/stoker (indexes, the default dataset)"),
    ("STOKER_METRICS_DIR", "library",
     "where running loaders publish their metrics for `stoker exporter` (default: "
     "/run/stoker where it can be written, else the cache folder's metrics/)"),
    ("STOKER_NO_URING", "library",
     "set: engine auto uses the pread pool without trying io_uring (as where seccomp refuses it)"),
    ("STOKER_NO_META_AHEAD", "library",
     "set (not `0`): O_DIRECT reads of files go without the threads that look their metadata "
     "up ahead of the opens (loader/meta.c), for measuring"),
    ("STOKER_PAGE_CACHE_BYTES", "library",
     "the page cache the direct/buffered choice counts on, where the machine's limit is not "
     "visible to /proc/meminfo and the cgroup (bytes)"),
    ("AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN", "library",
     "s3:// data: the credentials, first (never printed: the key id is masked, the secret "
     "never shown)"),
    ("AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE", "library",
     "s3:// data: the profile and the files it is read from (~/.aws/credentials, ~/.aws/config)"),
    ("AWS_REGION, AWS_DEFAULT_REGION", "library", "s3:// data: the region requests are signed for"),
    ("AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL", "library",
     "s3:// data: a custom endpoint (MinIO, SeaweedFS, Ceph), addressed path-style"),
    ("AWS_NO_SIGN_REQUEST", "library", "s3:// data: set: anonymous requests (public buckets)"),
    ("AWS_CA_BUNDLE, CURL_CA_BUNDLE, SSL_CERT_FILE, SSL_CERT_DIR", "library",
     "https:// data: the CA certificates TLS trusts instead of the system's (AWS_CA_BUNDLE for "
     "s3:// only; the first set of the three files, and the folder); TLS is always verified"),
    ("STOKER_REMOTE_TIMEOUT_MS, STOKER_REMOTE_CONNECT_TIMEOUT_MS, STOKER_REMOTE_TRIES, "
     "STOKER_REMOTE_RETRY_MS", "library",
     "remote data: set, they override the options remote_timeout, remote_connect_timeout (in ms), "
     "remote_tries and remote_retry_time (in ms) (a job whose launcher cannot be changed)"),
    ("STOKER_CUDART", "library", "path of the CUDA runtime to pin slots with, tried first"),
    ("STOKER_AV_LOG", "library",
     "1: FFmpeg's own log messages on stderr (video mode; silenced otherwise: errors come "
     "back naming the file)"),
    ("STOKER_NULL_CHANNELS", "library",
     "engine null models a device of K channels (the queue-depth tuner's tests)"),
    ("TMPDIR", "CLI", "`stoker pack DIR s3://...`: where each shard is staged before its upload "
     "(--stage's default; else /var/tmp)"),
    ("STOKER_REMOTE_WINDOW", "library",
     "remote data: the bytes a cache miss fetches around itself into the cache (default 8 MiB "
     "when the cache is on and keeps what windows bring: shard mode, or a dataset within half "
     "of cache_limit; 0: a member a request)"),
    ("CUDA_VISIBLE_DEVICES", "Python", "quoted when device=\"cuda\" finds no GPU"),
    ("STOKER_LIB", "Python", "path of libstoker.so.0 to load instead of the installed one"),
    ("STOKER_PYTHON", "CLI", "the interpreter `stoker bench --vs` runs the peers with"),
    ("PYTHONPATH", "CLI", "kept, after the package's own folder, for that interpreter"),
    ("STOKER_PEERS", "CLI, Python",
     "the peers' virtual environment (`make peers`; default: the cache folder's peers/)"),
    ("STOKER_PEERS_PYTHON", "CLI", "the interpreter `stoker bench --vs PEER,...` runs the peers with"),
    ("STOKER", "Python", "the stoker command `python3 -m stoker.vs_peers` packs shards with"),
    ("STOKER_NO_PROGRESS", "CLI", "set: no progress line on a terminal"),
    ("STOKER_NO_MPI", "CLI", "set (not 0): run as one process even under mpirun"),
    ("STOKER_LIBMPI", "CLI", "path of libmpi to load for `--mpi`, tried first"),
    ("STOKER_MPI_TIMEOUT", "CLI", "seconds an MPI rank waits for the others (bench, disk)"),
]


def markdown():
    out = ["# Options", "",
           "Every option of the loader, of image mode and of video mode, with its default",
           "and range, as libstoker's option table holds them (`STK_LOADER_OPTIONS`,",
           "`STK_IMAGE_OPTIONS` and `STK_VIDEO_OPTIONS` in include/stoker/options.h).  The",
           "same names are Python's keyword arguments (`stoker.Loader(path, **options)`,",
           "`stoker.Image(...)`, `stoker.Video(...)`), the CLI's flags (`-` for `_`; an",
           "option on by default is `--no-NAME`) and the C struct fields' options; a zero",
           "field in C takes the default.  A name in brackets is the table's alias for it (a keyword and a",
           "`stoker bench --sweep` knob too); a letter after the flag, its short form.",
           "A size takes units: K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024",
           "(`64k` = `64KiB` = 65536), KB, MB, GB, TB powers of 1000 (`64KB` = 64000);",
           "a duration takes ns, us, ms, s, m (minutes) or h (`30s`, `1.5m`), a bare",
           "number being ns here (the CLI's own --runtime and such take seconds).",
           "Generated by `python3 -m stoker.options`; `make test` checks that",
           "this file and the table agree.", ""]
    video_note = ["Their own list in the table (`STK_VIDEO_OPTIONS`): some names are image",
                  "mode's too.  `stoker.Video` takes them as keywords (scale and ratio as",
                  "(min, max) pairs); `stoker bench --video` has --frames, --stride, --fps,",
                  "--clips-per-video, --short-clip and --codec-threads of its own, and takes",
                  "--size, --decode-threads and the crop's (--crop, --no-flip, --scale-min,",
                  "..., --max-pixels, --max-decode-time) from image mode's flags.", ""]
    for group, title, rows, note in (
            (_lib.OPT_LOADER, "Loader (`struct stk_loader_opts`)", _lib.OPTIONS, []),
            (_lib.OPT_IMAGE, "Image mode (`struct stk_image_opts`; `stoker bench --image`, "
                             "`stoker.Image`)", _lib.OPTIONS, []),
            (_lib.OPT_VIDEO, "Video mode (`struct stk_video_opts`; `stoker bench --video`, "
                             "`stoker.Video`)", _lib.VIDEO_OPTIONS, video_note)):
        out += ["## " + title, ""] + note + ["| option | CLI | default | values | meaning |",
                                             "| --- | --- | --- | --- | --- |"]
        for row in rows.values():
            if row.group != group:
                continue
            default = "`%s`" % row.default if row.default else "(none)"
            out.append("| %s | `%s` | %s | %s | %s |" % (
                _name(row), _cli(row), default, _values(row), row.help.replace("|", "\\|")))
        out.append("")
    out += ["## Environment", "",
            "Every environment variable stoker reads.  Options are not set through the",
            "environment: these are the launcher's, the user's folders, and switches for",
            "tests and diagnosis.", "",
            "| variable | read by | meaning |", "| --- | --- | --- |"]
    for names, who, meaning in ENVIRONMENT:
        out.append("| %s | %s | %s |" % (", ".join("`%s`" % n.strip() for n in names.split(",")),
                                         who, meaning.replace("|", "\\|")))
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown(), end="")
