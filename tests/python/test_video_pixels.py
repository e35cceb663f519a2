"""stoker's video frames against PyAV's decode of the same timestamps (issue
38): at full size (centre crop of the whole frame, no resize) each frame of a
clip is within 1 grey level (mean |difference|) of PyAV's frame with the same
pts; resized, within image mode's tolerance against PIL (2 grey levels, as
tests/image_vs_pil.py): PyAV's frame through PIL's Resize + CenterCrop.

stk_video_decode and stk_video_make are called through ctypes (the public C
interface); the videos are made by stk_video_make in tmp_path.  Skipped only
where PyAV is absent (Debian: apt-get install python3-av, which mk/deps.sh
installs for make test; it decodes with the same libavcodec as stoker).
"""

import ctypes

import pytest

av = pytest.importorskip("av", reason="PyAV is not installed (Debian: apt-get install python3-av)")
np = pytest.importorskip("numpy")

from stoker import _lib  # noqa: E402

STK_VCROP_RANDOM, STK_VCROP_CENTER = 0, 1
STK_VID_NO_FLIP = 1
VideoOpts, ClipInfo, MakeOpts = _lib.VideoOpts, _lib.ClipInfo, _lib.VideoMakeOpts  # checked
# against the library's sizeof when stoker is imported


@pytest.fixture(scope="module")
def lib():
    lib = ctypes.CDLL(_lib.lib_path)  # a handle of its own: the binding's prototypes untouched
    lib.stk_video_make.argtypes = [ctypes.c_char_p, ctypes.POINTER(MakeOpts), ctypes.c_char_p,
                                   ctypes.c_size_t]
    lib.stk_video_clip_bytes.argtypes = [ctypes.POINTER(VideoOpts)]
    lib.stk_video_clip_bytes.restype = ctypes.c_size_t
    lib.stk_video_decode.argtypes = [ctypes.POINTER(VideoOpts), ctypes.c_char_p, ctypes.c_size_t,
                                     ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                                     ctypes.c_uint32, ctypes.c_void_p, ctypes.POINTER(ClipInfo),
                                     ctypes.c_char_p, ctypes.c_size_t]
    return lib


def make_video(lib, path, w, h, frames, gop, seed=1):
    o = MakeOpts(size=ctypes.sizeof(MakeOpts), width=w, height=h, frames=frames, fps=25.0,
                 gop=gop, codec=b"h264", seed=seed)
    err = ctypes.create_string_buffer(512)
    rc = lib.stk_video_make(str(path).encode(), ctypes.byref(o), err, len(err))
    assert rc == 0, err.value.decode()
    return path.read_bytes()


def decode(lib, data, opts, index=0, clip=0, seed=0, epoch=0):
    """stoker's clip: (T x H x W x 3 uint8, struct stk_clip_info)."""
    out = np.zeros(lib.stk_video_clip_bytes(ctypes.byref(opts)), dtype=np.uint8)
    info = ClipInfo(size=ctypes.sizeof(ClipInfo))
    err = ctypes.create_string_buffer(512)
    rc = lib.stk_video_decode(ctypes.byref(opts), data, len(data), seed, epoch, index, clip,
                              out.ctypes.data, ctypes.byref(info), err, len(err))
    assert rc == 0, err.value.decode()
    return out.reshape(opts.frames, opts.out_size, opts.out_size, 3), info


def pyav_frames(path):
    """Every frame PyAV decodes, in presentation order: [(pts, RGB array)]."""
    with av.open(str(path)) as c:
        got = [(f.pts, f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]
    return sorted(got, key=lambda x: x[0])


def pyav_clip(frames, start_pts, t, stride):
    """The t frames at stride from the one whose pts is start_pts."""
    pts = [p for p, _ in frames]
    assert start_pts in pts, "stoker's start pts %d is no frame PyAV decoded" % start_pts
    i = pts.index(start_pts)
    assert i + (t - 1) * stride < len(frames), "the clip runs past the video's end"
    return [frames[i + j * stride][1] for j in range(t)]


def mad(a, b):
    return float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean())


def opts_full(side, frames=8, stride=2, clips=3, crop=STK_VCROP_CENTER):
    return VideoOpts(size=ctypes.sizeof(VideoOpts), flags=STK_VID_NO_FLIP, frames=frames,
                     stride=stride, out_size=side, crop=crop, scale_min=1.0, scale_max=1.0,
                     ratio_min=1.0, ratio_max=1.0, crop_frac=1.0, clips_per_video=clips)


def test_full_size_frames_equal_pyav(lib, tmp_path):
    """Square video, output its own size: no crop, no resize, so each frame
    is the decoder's frame converted to RGB; clips spread over the video
    start between keyframes (gop 12), so each is a seek plus forward decode."""
    path = tmp_path / "sq.mp4"
    data = make_video(lib, path, 192, 192, 60, 12)
    ref = pyav_frames(path)
    assert len(ref) >= 59  # stk_video_make's MP4 edit list ends a frame early (59 shown)
    o = opts_full(192)
    starts, worst = set(), 0.0
    for k in range(3):
        clip, info = decode(lib, data, o, index=k, clip=k)
        starts.add(info.start_pts)
        want = pyav_clip(ref, info.start_pts, 8, 2)
        for j in range(8):
            d = mad(clip[j], want[j])
            worst = max(worst, d)
            assert d <= 1.0, "clip %d frame %d: mean |diff| %.3f against PyAV's" % (k, j, d)
        # the comparison can tell frames apart: the next frame is farther off
        assert mad(clip[0], want[1]) > 1.0
    assert len(starts) == 3, "the three clips start at the same frame: %s" % sorted(starts)
    print("full size: worst mean |diff| %.3f (limit 1)" % worst)


def test_random_clip_full_box_equals_pyav(lib, tmp_path):
    """The random mode's start (seeded per sample) with a box of the whole
    frame (scale 1, ratio 1, no flip): the frames PyAV decodes at the pts
    stoker says it started from."""
    path = tmp_path / "r.mkv"
    data = make_video(lib, path, 128, 128, 75, 25, seed=3)
    ref = pyav_frames(path)
    o = opts_full(128, frames=6, stride=3, clips=1, crop=STK_VCROP_RANDOM)
    for index in (0, 5, 11):
        clip, info = decode(lib, data, o, index=index, seed=7)
        want = pyav_clip(ref, info.start_pts, 6, 3)
        for j in range(6):
            assert mad(clip[j], want[j]) <= 1.0, "sample %d frame %d" % (index, j)
        again, info2 = decode(lib, data, o, index=index, seed=7)
        assert info2.start_pts == info.start_pts and np.array_equal(again, clip)


def test_resized_within_image_tolerance_of_pil(lib, tmp_path):
    """Non-square video resized to 112 (short side) and centre-cropped:
    within 2 grey levels of PyAV's frame through PIL's Resize(112) +
    CenterCrop(112) (torchvision's rounding), image mode's tolerance."""
    from PIL import Image
    path = tmp_path / "wide.mp4"
    data = make_video(lib, path, 320, 240, 40, 10, seed=5)
    ref = pyav_frames(path)
    o = opts_full(112, frames=4, stride=2, clips=2)
    worst = 0.0
    for k in range(2):
        clip, info = decode(lib, data, o, index=k, clip=k)
        want = pyav_clip(ref, info.start_pts, 4, 2)
        for j in range(4):
            im = Image.fromarray(want[j])
            w = int(112 * 320 / 240)
            im = im.resize((w, 112), Image.BILINEAR)
            left = int(round((w - 112) / 2.0))
            exp = np.asarray(im.crop((left, 0, left + 112, 112)))
            d = mad(clip[j], exp)
            worst = max(worst, d)
            assert d <= 2.0, "clip %d frame %d: mean |diff| %.3f against PIL's" % (k, j, d)
    print("resized: worst mean |diff| %.3f (limit 2)" % worst)


def test_decode_writes_only_its_clip(lib, tmp_path):
    """stk_video_decode writes stk_video_clip_bytes and not a byte past them
    (in the loader, past a clip is the next clip or the slot's end), at
    output sides that are and are not multiples of 16, resized and not."""
    path = tmp_path / "g.mp4"
    data = make_video(lib, path, 320, 200, 20, 10, seed=2)
    bad = []
    for side in (200, 120, 100, 96, 224):
        for crop in (STK_VCROP_CENTER, STK_VCROP_RANDOM):
            o = opts_full(side, frames=4, stride=1, clips=1, crop=crop)
            n = lib.stk_video_clip_bytes(ctypes.byref(o))
            buf = np.full(n + 256, 0xA5, dtype=np.uint8)
            info = ClipInfo(size=ctypes.sizeof(ClipInfo))
            err = ctypes.create_string_buffer(512)
            rc = lib.stk_video_decode(ctypes.byref(o), data, len(data), 0, 0, 0, 0,
                                      buf.ctypes.data, ctypes.byref(info), err, len(err))
            assert rc == 0, err.value.decode()
            if (buf[n:] != 0xA5).any():
                bad.append("side %d crop %d: %d bytes written past the clip"
                           % (side, crop, int((buf[n:] != 0xA5).sum())))
    assert not bad, "; ".join(bad)
