# stoker — plain GNU make.  `make run` builds and runs the main job; `make test`.
# Switches: V=1 (show commands), SANITIZE=address,undefined | thread, PYTHON=...

PYTHON ?= /usr/bin/python3
CC ?= cc
PREFIX ?= /usr/local
PKG_CONFIG ?= pkg-config

ifeq ($(SANITIZE),)
BUILD ?= build
SANFLAGS :=
else
BUILD ?= build-$(subst $(comma),-,$(SANITIZE))
SANFLAGS := -fsanitize=$(SANITIZE) -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
comma := ,

Q := @
ifeq ($(V),1)
Q :=
endif

PKGS := liburing libjpeg libpng libwebp libwebpdemux jansson libmicrohttpd libcurl
# FFmpeg: headers only; src/video/av.c loads the libraries with dlopen (no -l).
AV_PKGS := libavformat libavcodec libswscale libavutil
# One owner: the version is include/stoker/stoker.h's STK_VERSION_*.
VERSION := $(shell sed -n 's/^\#define STK_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$$/\2/p' \
	include/stoker/stoker.h | paste -sd.)
DEPS_OK := $(BUILD)/.deps-ok

WARN := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes -Wmissing-prototypes
ifneq ($(CI),)
WARN += -Werror
endif
CFLAGS ?= -O2 -g
ALL_CFLAGS = -std=gnu11 $(WARN) $(CFLAGS) $(SANFLAGS) -pthread -Iinclude -D_GNU_SOURCE \
	-MMD -MP $(shell $(PKG_CONFIG) --cflags $(PKGS) $(AV_PKGS) 2>/dev/null)
LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null) -ldl -lm -pthread
LDFLAGS_ALL := $(LDFLAGS) $(SANFLAGS)

LIB_SRC := $(sort $(wildcard src/*/*.c))
LIB_OBJ := $(LIB_SRC:src/%.c=$(BUILD)/src/%.o)
TOOL_SRC := $(sort $(wildcard tools/*.c tools/*/*.c))
TOOL_OBJ := $(TOOL_SRC:tools/%.c=$(BUILD)/tools/%.o)
TEST_SRC := $(sort $(wildcard tests/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EXAMPLE_SRC := $(sort $(wildcard examples/*.c))
EXAMPLE_BIN := $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)

.PHONY: all run test test-c test-cli test-py bench deps clean install uninstall man deb fuzz soak
all: $(BUILD)/libstoker.so $(BUILD)/libstoker.a $(BUILD)/stoker

$(DEPS_OK): mk/deps.sh
	$(Q)mkdir -p $(BUILD)
	$(Q)PYTHON=$(PYTHON) sh mk/deps.sh build
	$(Q)touch $@

deps: $(DEPS_OK)

# The resampler's inner loops are written for the vectorizer; no fused
# multiply-adds (a -march with FMA would otherwise contract some of them), so
# every SIMD level gives the same bytes.
$(BUILD)/src/image/resample.o: FILE_CFLAGS = -O3 -ffp-contract=off
# The same for `stoker gen`'s pictures (no traps either: selects, not branches).
$(BUILD)/tools/gen/image.o: FILE_CFLAGS = -O3 -ffp-contract=off -fno-trapping-math

$(BUILD)/src/%.o: src/%.c $(DEPS_OK)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(FILE_CFLAGS) -Isrc -fPIC -fvisibility=hidden -DSTK_BUILDING -c -o $@ $<

$(BUILD)/tools/%.o: tools/%.c $(DEPS_OK)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(FILE_CFLAGS) -Itools -c -o $@ $<

$(BUILD)/libstoker.so: $(LIB_OBJ) src/libstoker.map
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -shared -o $@.0 $(LIB_OBJ) -Wl,--version-script=src/libstoker.map \
		-Wl,-soname,libstoker.so.0 $(LDFLAGS_ALL) $(LIBS)
	$(Q)ln -sf libstoker.so.0 $@

$(BUILD)/libstoker.a: $(LIB_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $(LIB_OBJ)

# The CLI links the shared library: it sees only the public API.
$(BUILD)/stoker: $(TOOL_OBJ) $(BUILD)/libstoker.so
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) -o $@ $(TOOL_OBJ) -L$(BUILD) -l:libstoker.so -Wl,-rpath,'$$ORIGIN:$$ORIGIN/../lib' \
		$(LDFLAGS_ALL) $(LIBS)

# Tests link the static library so they can reach internal functions too.
$(BUILD)/tests/%: tests/%.c $(BUILD)/libstoker.a tests/testutil.h tests/testjpeg.h
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -Isrc -o $@ $< $(BUILD)/libstoker.a $(LDFLAGS_ALL) \
		$(shell $(PKG_CONFIG) --libs cmocka 2>/dev/null) $(LIBS)

# A stand-in CUDA runtime for test_pin (the real one's failures on demand),
# and for the carried GPU build (bench/gpu_prepare.sh).
$(BUILD)/tests/stub/libcudart.so.12: tests/stub_cudart.c
	@mkdir -p $(@D)
	$(Q)$(CC) -shared -fPIC -O1 -o $@ $< -Wl,-soname,libcudart.so.12
$(BUILD)/tests/test_pin: $(BUILD)/tests/stub/libcudart.so.12
# test_png_webp writes its PNGs' zlib streams itself (libpng's zlib).
$(BUILD)/tests/test_png_webp: LIBS += $(shell $(PKG_CONFIG) --libs zlib 2>/dev/null)

$(BUILD)/examples/%: examples/%.c $(BUILD)/libstoker.so
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD) -l:libstoker.so -Wl,-rpath,'$$ORIGIN/..' \
		$(LDFLAGS_ALL)

# The main job: the loader over a generated default dataset (made once, cached).
run: all
	STOKER_PYTHON=$(PYTHON) ./$(BUILD)/stoker bench --vs torch

# Everything the tests need first: Debian's packages (mk/deps.sh: installed as
# root, else the apt-get line), then pip's in the venvs under build/ (made once;
# as root, else the line to run).  The binding on PyTorch 2.x (test-py-venv)
# and the binary wheel installed in a fresh venv over it (test-wheel) in the
# plain pass only: the sanitizer passes test our code, not pip's torch.
test: all
	$(Q)PYTHON=$(PYTHON) sh mk/deps.sh test
	$(Q)$(MAKE) --no-print-directory test-venvs
	$(Q)$(MAKE) --no-print-directory test-c test-cli test-py $(if $(SANITIZE),,test-py-venv test-wheel)
	@echo "all tests passed ($(BUILD))"

# The tests' virtual environments (mk/venvs.sh), in build/ whatever BUILD is, so
# every pass uses the same.  `make venvs` makes them as any user.
VENVS := $(CURDIR)/build
VENV_PYTHON ?= /usr/bin/python3
VENV_MODE ?= auto
VENV_STAMPS := $(VENVS)/remote-venv/.stoker-made $(VENVS)/torch-venv/.stoker-made \
	$(VENVS)/trainers-venv/.stoker-made
$(VENVS)/%-venv/.stoker-made: mk/venvs.sh
	$(Q)VENV_PYTHON=$(VENV_PYTHON) sh mk/venvs.sh $(VENV_MODE) $* $(@D)
$(VENVS)/torch-venv/.stoker-made: bench/peers/setup.sh
$(VENVS)/trainers-venv/.stoker-made: mk/trainers.sh $(VENVS)/torch-venv/.stoker-made
.PHONY: venvs test-venvs
test-venvs: $(VENV_STAMPS)
	@:
venvs:
	$(Q)$(MAKE) --no-print-directory VENV_MODE=make test-venvs

# The tests' index caches (lists, read-only folders) go to the build folder,
# not the user's ~/.cache/stoker.
TEST_ENV = XDG_CACHE_HOME=$(CURDIR)/$(BUILD)/test-cache \
	STOKER_TRAINERS_PYTHON=$(or $(STOKER_TRAINERS_PYTHON),$(VENVS)/trainers-venv/bin/python)
# Under ThreadSanitizer: FFmpeg's own frame threads are not instrumented (tests/tsan.supp).
ifneq ($(findstring thread,$(SANITIZE)),)
TEST_ENV += TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp $(TSAN_OPTIONS)"
endif

test-c: $(TEST_BIN) $(EXAMPLE_BIN)
	$(Q)$(TEST_ENV) sh tests/run_c.sh $(BUILD) $(TEST_BIN)

test-cli: all $(EXAMPLE_BIN)
	$(Q)$(TEST_ENV) BUILD=$(BUILD) SANITIZE=$(SANITIZE) sh tests/cli.sh

# Python tests (pytest under Debian's interpreter, where python3-torch lives).
# Under ASan the runtime must come first in the process: preload it.
ifneq ($(findstring address,$(SANITIZE)),)
PY_PRELOAD = LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0
endif
test-py: all
	$(Q)if [ -d tests/python ]; then \
		$(PY_PRELOAD) $(TEST_ENV) STOKER_LIB=$(CURDIR)/$(BUILD)/libstoker.so.0 STOKER=$(CURDIR)/$(BUILD)/stoker \
		PYTHONPATH=$(CURDIR)/python $(PYTHON) -m pytest -q tests/python; fi

# The peers' virtual environment (PyTorch 2.x, DALI, SPDL, Streaming, LitData,
# WebDataset, FFCV...) for `stoker bench --vs all` (in ~/.cache/stoker/peers;
# make test has its own PyTorch 2.x in build/torch-venv).
.PHONY: peers
peers:
	$(Q)sh bench/peers/setup.sh

# The binding's tests on PyTorch 2.x as well (pip's wheels in build/torch-venv:
# torch, torchvision and pytest; made by make venvs, or make test as root).
PEERS_PYTHON ?= $(VENVS)/torch-venv/bin/python
.PHONY: test-py-venv
test-py-venv: all
	$(Q)if [ -x $(PEERS_PYTHON) ]; then \
		$(MAKE) --no-print-directory test-py PYTHON=$(PEERS_PYTHON); \
	else echo "test-py-venv: skipped: no $(PEERS_PYTHON) (PyTorch 2.x): make it with: make venvs"; fi

bench: all
	$(Q)PYTHON=$(PYTHON) sh mk/deps.sh bench
	$(Q)BUILD=$(BUILD) PYTHON=$(PYTHON) sh bench/run.sh

# Optional: libFuzzer on the tar header parser (needs clang).  New inputs go to
# $(BUILD)/fuzz-corpus; add any crasher, once fixed, to tests/fuzz/tar_corpus
# (test_tar replays that corpus in every `make test`).
FUZZ_TIME ?= 300
$(BUILD)/fuzz_tar: tests/fuzz/fuzz_tar.c src/dataset/tar.c src/dataset/tar.h
	@mkdir -p $(@D)
	$(Q)clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE \
		-Iinclude -Isrc tests/fuzz/fuzz_tar.c src/dataset/tar.c -o $@
# The restart-interval scanner and sub-image builder (src/image/jpeg_rst.c); its
# corpus, tests/fuzz/rst_corpus, is replayed by test_jpeg_rst.
$(BUILD)/fuzz_rst: tests/fuzz/fuzz_rst.c src/image/jpeg_rst.c src/image/jpeg_rst.h
	@mkdir -p $(@D)
	$(Q)clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE \
		-Isrc tests/fuzz/fuzz_rst.c src/image/jpeg_rst.c -o $@
# The JPEG path (stk_image_decode, random crop boxes) and the index-cache
# loader (stk__index_load) need the whole library: built from its sources
# with clang.  Their corpora, tests/fuzz/image_corpus and index_corpus
# (tests/fuzz/make_corpus.py wrote the seeds), are replayed by test_fuzz.
FUZZ_LIB_CFLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu11 -D_GNU_SOURCE -pthread \
	-Iinclude -Isrc $(shell $(PKG_CONFIG) --cflags $(PKGS) $(AV_PKGS) 2>/dev/null)
$(BUILD)/fuzz_image: tests/fuzz/fuzz_image.c $(LIB_SRC) $(wildcard src/*/*.h)
	@mkdir -p $(@D)
	$(Q)clang $(FUZZ_LIB_CFLAGS) tests/fuzz/fuzz_image.c $(LIB_SRC) -o $@ $(LIBS)
$(BUILD)/fuzz_index: tests/fuzz/fuzz_index.c $(LIB_SRC) $(wildcard src/*/*.h)
	@mkdir -p $(@D)
	$(Q)clang $(FUZZ_LIB_CFLAGS) tests/fuzz/fuzz_index.c $(LIB_SRC) -o $@ $(LIBS)
# Lists of shard URLs (dataset/url_list.c); test_fuzz replays tests/fuzz/url_list_corpus.
$(BUILD)/fuzz_url_list: tests/fuzz/fuzz_url_list.c $(LIB_SRC) $(wildcard src/*/*.h)
	@mkdir -p $(@D)
	$(Q)clang $(FUZZ_LIB_CFLAGS) tests/fuzz/fuzz_url_list.c $(LIB_SRC) -o $@ $(LIBS)
# The tar member types through the shard index; test_tar replays tests/fuzz/tar_types_corpus.
$(BUILD)/fuzz_tar_types: tests/fuzz/fuzz_tar_types.c $(LIB_SRC) $(wildcard src/*/*.h)
	@mkdir -p $(@D)
	$(Q)clang $(FUZZ_LIB_CFLAGS) tests/fuzz/fuzz_tar_types.c $(LIB_SRC) -o $@ $(LIBS)
# The PNG and WebP paths (src/image/png.c, webp.c: libspng, libwebp) the same
# way; their corpora, tests/fuzz/png_corpus and webp_corpus, are replayed by test_fuzz.
$(BUILD)/fuzz_png $(BUILD)/fuzz_webp: $(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_opts.h \
		$(LIB_SRC) $(wildcard src/*/*.h)
	@mkdir -p $(@D)
	$(Q)clang $(FUZZ_LIB_CFLAGS) $< $(LIB_SRC) -o $@ $(LIBS)
# The video path (src/video/: demux from memory, probe, a clip's decode over
# FFmpeg's libraries, which are not instrumented); test_video replays
# tests/fuzz/video_corpus (tests/fuzz/make_video_corpus.c wrote the seeds).
$(BUILD)/fuzz_video: tests/fuzz/fuzz_video.c $(LIB_SRC) $(wildcard src/*/*.h)
	@mkdir -p $(@D)
	$(Q)clang $(FUZZ_LIB_CFLAGS) tests/fuzz/fuzz_video.c $(LIB_SRC) -o $@ $(LIBS)
# The video index and the ranged path (src/video/vindex.c, vrecord.c, demux.c over byte
# ranges, clip.c): test_video replays tests/fuzz/vindex_corpus.
$(BUILD)/fuzz_vindex: tests/fuzz/fuzz_vindex.c $(LIB_SRC) $(wildcard src/*/*.h)
	@mkdir -p $(@D)
	$(Q)clang $(FUZZ_LIB_CFLAGS) tests/fuzz/fuzz_vindex.c $(LIB_SRC) -o $@ $(LIBS)
FUZZERS = tar rst image index url_list tar_types png webp video vindex
# clang and libFuzzer first (installed as root, else the apt-get line)
.PHONY: fuzz-deps
fuzz-deps:
	$(Q)sh mk/deps.sh fuzz
$(FUZZERS:%=$(BUILD)/fuzz_%): | fuzz-deps

fuzz: $(FUZZERS:%=$(BUILD)/fuzz_%)
	$(Q)mkdir -p $(BUILD)/fuzz-corpus $(BUILD)/fuzz-rst-corpus $(BUILD)/fuzz-image-corpus \
		$(BUILD)/fuzz-index-corpus $(BUILD)/fuzz-tar-types-corpus $(BUILD)/fuzz-png-corpus \
		$(BUILD)/fuzz-webp-corpus $(BUILD)/fuzz-url-list-corpus $(BUILD)/fuzz-video-corpus
	$(Q)$(BUILD)/fuzz_tar -max_total_time=$(FUZZ_TIME) -max_len=65536 \
		-artifact_prefix=$(BUILD)/ $(BUILD)/fuzz-corpus tests/fuzz/tar_corpus
	$(Q)$(BUILD)/fuzz_rst -max_total_time=$(FUZZ_TIME) -max_len=65536 \
		-artifact_prefix=$(BUILD)/rst- $(BUILD)/fuzz-rst-corpus tests/fuzz/rst_corpus
	$(Q)$(BUILD)/fuzz_image -max_total_time=$(FUZZ_TIME) -max_len=65536 -rss_limit_mb=4096 \
		-artifact_prefix=$(BUILD)/image- $(BUILD)/fuzz-image-corpus tests/fuzz/image_corpus
	$(Q)$(BUILD)/fuzz_index -max_total_time=$(FUZZ_TIME) -max_len=65536 \
		-artifact_prefix=$(BUILD)/index- $(BUILD)/fuzz-index-corpus tests/fuzz/index_corpus
	$(Q)$(BUILD)/fuzz_url_list -max_total_time=$(FUZZ_TIME) -max_len=4096 \
		-artifact_prefix=$(BUILD)/url-list- $(BUILD)/fuzz-url-list-corpus tests/fuzz/url_list_corpus
	$(Q)$(BUILD)/fuzz_tar_types -max_total_time=$(FUZZ_TIME) -max_len=65536 \
		-artifact_prefix=$(BUILD)/tar-types- $(BUILD)/fuzz-tar-types-corpus \
		tests/fuzz/tar_types_corpus
	$(Q)for f in png webp; do $(BUILD)/fuzz_$$f -max_total_time=$(FUZZ_TIME) -max_len=65536 \
		-rss_limit_mb=4096 -artifact_prefix=$(BUILD)/$$f- $(BUILD)/fuzz-$$f-corpus \
		tests/fuzz/$${f}_corpus || exit 1; done
	$(Q)$(BUILD)/fuzz_video -max_total_time=$(FUZZ_TIME) -max_len=65536 -rss_limit_mb=4096 \
		-artifact_prefix=$(BUILD)/video- $(BUILD)/fuzz-video-corpus tests/fuzz/video_corpus
	$(Q)mkdir -p $(BUILD)/fuzz-vindex-corpus
	$(Q)$(BUILD)/fuzz_vindex -max_total_time=$(FUZZ_TIME) -max_len=65536 -rss_limit_mb=4096 \
		-artifact_prefix=$(BUILD)/vindex- $(BUILD)/fuzz-vindex-corpus tests/fuzz/vindex_corpus

# The soak (not in `make test`: minutes): SOAK_EPOCHS epochs in image mode over
# a generated folder while a thread deletes and restores its files; every
# sample delivered or counted, images (and, keep_raw, bytes) right, RSS within 2 %, descriptors flat
# (tests/soak.c).  Then a shorter run under on_error replace: every batch full.
SOAK_EPOCHS ?= 200
SOAK_IMAGES ?= 400
$(BUILD)/soak: tests/soak.c $(BUILD)/libstoker.so
	@mkdir -p $(@D)
	$(Q)$(CC) $(ALL_CFLAGS) -o $@ $< -L$(BUILD) -l:libstoker.so -Wl,-rpath,'$$ORIGIN' \
		$(LDFLAGS_ALL) -pthread
soak: all $(BUILD)/soak
	$(Q)rm -rf $(BUILD)/soak-data
	$(Q)./$(BUILD)/stoker gen $(BUILD)/soak-data --images $(SOAK_IMAGES) --classes 10 >/dev/null
	$(Q)./$(BUILD)/soak $(BUILD)/soak-data $(SOAK_EPOCHS) skip
	$(Q)./$(BUILD)/soak $(BUILD)/soak-data $$(( $(SOAK_EPOCHS) / 4 )) replace
	$(Q)rm -rf $(BUILD)/soak-data

# --- installing: `make install`, `make uninstall` (mk/install.sh keeps a manifest),
# `make deb` (debian/), the Python package for pip (python/setup.py) --------------
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
PYDIR ?= $(shell $(PYTHON) mk/pydir.py '$(PREFIX)')
INSTALL_ENV = BUILD='$(BUILD)' PREFIX='$(PREFIX)' DESTDIR='$(DESTDIR)' BINDIR='$(BINDIR)' \
	LIBDIR='$(LIBDIR)' INCLUDEDIR='$(INCLUDEDIR)' MANDIR='$(MANDIR)' \
	PKGCONFIGDIR='$(PKGCONFIGDIR)' PYDIR='$(PYDIR)' VERSION='$(VERSION)' \
	LIBS_PRIVATE='$(strip $(LIBS))' MAKEARGS='$(MAKEOVERRIDES)'

# Man pages from each subcommand's --help (help2man).
man: $(BUILD)/man/stoker.1
$(BUILD)/man/stoker.1: $(BUILD)/stoker mk/man.sh
	$(Q)PYTHON=$(PYTHON) sh mk/deps.sh install
	@$(if $(Q),echo "  MAN     $(@D)")
	$(Q)sh mk/man.sh $(BUILD)/stoker $(@D) $(VERSION)

install: all man
	$(Q)$(INSTALL_ENV) sh mk/install.sh install

uninstall:
	$(Q)$(INSTALL_ENV) sh mk/install.sh uninstall

# The Debian package (debian/, debhelper) built from a copy of the tree in
# $(BUILD)/deb; lintian-clean of errors; written to DEBDIR as stoker_<version>_<arch>.deb.
DEBDIR ?= $(CURDIR)
deb: $(DEPS_OK)
	$(Q)PYTHON=$(PYTHON) sh mk/deps.sh deb
	$(Q)sh mk/deb.sh $(VERSION) $(CURDIR)/$(BUILD)/deb $(DEBDIR)

# The binary wheel for pip without a compiler (mk/wheel.sh): python -m build,
# then auditwheel repair grafts the libraries libstoker and the CLI link;
# build/wheel/stoker-<version>-py3-none-manylinux_*.whl.  `make test-wheel`
# installs it into a fresh venv over the PyTorch 2.x of TORCH_VENV (made by
# bench/peers/setup.sh torch) and runs the binding's tests there.  Always the
# plain build, in build/.
.PHONY: wheel test-wheel
wheel:
	$(Q)VENV_PYTHON=$(PYTHON) PLAT=$(or $(WHEEL_PLAT),auto) sh mk/wheel.sh build
TORCH_VENV ?= $(CURDIR)/build/torch-venv
test-wheel: wheel
	$(Q)VENV_PYTHON=$(PYTHON) TORCH_VENV=$(TORCH_VENV) sh mk/wheel.sh test

clean:
	rm -rf build build-* stoker_*.deb

-include $(LIB_OBJ:.o=.d) $(TOOL_OBJ:.o=.d)
