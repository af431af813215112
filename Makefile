# pyscope: build, test, demo, install.
#   make            build ./pyscope
#   make demo       build, start the bundled demo program and dump it
#   make test       unit tests and fuzzers (release and ASan+UBSan), consumer checks, the
#                   integration suite, and again under ASan+UBSan on four interpreters;
#                   ends with each stage's time and the 20 slowest tests
#   make test-quick unit tests and the integration suite on two interpreters (the edit loop)
#   make consumers  profile output read by its real consumers (go tool pprof, speedscope's schema)
#   make bench-html size and opening time of the HTML report of 10 minutes x 50 threads
#   make install PREFIX=/usr/local [PYTHON=/path/to/python]   (PYTHON: for %load_ext pyscope)
#                   also installs pyscope-agent.service under SYSTEMD_UNIT_DIR

CC      ?= gcc
PREFIX  ?= /usr/local
# pyscope agent's unit (systemd also reads /usr/local/lib/systemd/system).
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
PYTHON_TEST ?= /usr/bin/python3
# The integration suite runs under pytest-xdist, except the tests marked
# serial (timing and CPU shares compared with the truth), which run alone
# afterwards. Most tests wait on their target more than they compute: with
# two workers more than the machine's CPUs `make test-quick` took 158 s,
# against 191 s with one more (2 CPUs, load 2.5-4, the same build).
XDIST_WORKERS ?= $(shell echo $$(( $$(nproc) + 2 )))
# The ASan+UBSan pass of the integration suite: the oldest shared-libpython
# build with symbols, and Debian's static, stripped 3.11 (not PIE; the first
# of the 3.11+ frames) and 3.15 (the newest layout, read through
# _Py_DebugOffsets).
ASAN_INTERPRETERS ?= 3.8.18,debian-3.11,debian-3.15
QUICK_INTERPRETERS ?= 3.8.18,debian-3.15
RESULTS = build/test-results
PYTEST = $(PYTHON_TEST) -m pytest -q
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
CFLAGS_COMMON = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Isrc
CFLAGS  ?= -O2 -g
# elfutils and the compression libraries it reads debug sections with are
# linked from Debian's static archives: loading and relocating the shared
# ones was a tenth of a dump's wall time. glibc stays shared. zstd and lz4
# expand compressed cores (src/target/decompress.c), as do lzma and z;
# xxhash checks an lz4 frame's content on a second thread (lz4_index.c).
# ISA-L (shared only in Debian) inflates gzip cores, 2.5 times zlib's speed.
# libmicrohttpd is not linked: the agent opens it (dlopen) when it starts
# serving, so that no other command loads it and GnuTLS behind it.
LIBS    = -Wl,-Bstatic -ldw -lelf -lz -llzma -lbz2 -lzstd -llz4 -lxxhash -Wl,-Bdynamic -lisal
SAN_FLAGS = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

SRC      := $(shell find src -name '*.c' | sort)
LIB_SRC  := $(filter-out src/main.c,$(SRC))
OBJ      := $(LIB_SRC:%.c=build/release/%.o)
SAN_OBJ  := $(LIB_SRC:%.c=build/asan/%.o)
# The HTML report's page, CSS and JS, embedded into the binary as byte arrays.
HTML_ASSETS := src/output/html/report.html src/output/html/report.css src/output/html/report.js
HTML_ASSETS_C := build/gen/html_assets.c
OBJ      += build/release/gen/html_assets.o
SAN_OBJ  += build/asan/gen/html_assets.o
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_HELPERS := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=build/release/unit/%)
UNIT_SAN_BIN := $(UNIT_SRC:tests/unit/%.c=build/asan/unit/%)

DEB_PACKAGES = gcc make libelf-dev libdw-dev zlib1g-dev liblzma-dev libbz2-dev libzstd-dev liblz4-dev libxxhash-dev libisal-dev libmicrohttpd-dev python3-pytest python3-pytest-xdist \
               patchelf \
               gdb python3.11-dev python3.11-dbg clang libclang-rt-14-dev
# `make test` only: headless Chromium, which opens the HTML report in
# tests/integration/test_html.py; the compressors that make the compressed
# cores of tests/integration/test_cores.py; tmux, the terminal
# tests/integration/test_top.py runs `pyscope top` in; Prometheus, which
# scrapes the agent in tests/integration/test_agent.py; uvloop, the event loop
# tests/integration/test_asyncio.py also runs on Debian's python3.11.
TEST_DEB_PACKAGES = chromium zstd lz4 xz-utils tmux prometheus python3-uvloop

# `make consumers` and `make test` (whose record tests use them too): go for
# `go tool pprof`, node and npm for speedscope's schema check; the npm
# packages go under build/, never into the tree.
CONSUMER_DEB_GO   = golang-go
CONSUMER_DEB_NODE = nodejs npm
CONSUMER_NPM      = speedscope@1.25.0 ajv@8.20.0
CONSUMER_NODE_DIR = build/consumers/npm
SAMPLES_DIR       = build/consumers/samples

.PHONY: all asan deps test-deps unit unit-asan integration integration-serial integration-asan \
        fuzz test test-quick test-build demo install clean consumers consumers-deps bench-html

all: pyscope

pyscope: build/release/src/main.o $(OBJ)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS) -o $@ $^ $(LIBS)

build/asan/pyscope: build/asan/src/main.o $(SAN_OBJ)
	@echo "  LINK    $@"
	@$(CC) $(SAN_FLAGS) -o $@ $^ $(LIBS)

asan: build/asan/pyscope

build/release/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_COMMON) $(CFLAGS) -MMD -c -o $@ $<

build/asan/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC/SAN  $<"
	@$(CC) $(CFLAGS_COMMON) $(SAN_FLAGS) -MMD -c -o $@ $<

$(HTML_ASSETS_C): $(HTML_ASSETS) tools/embed_assets.sh
	@mkdir -p $(dir $@)
	@echo "  EMBED   $(HTML_ASSETS)"
	@sh tools/embed_assets.sh $@ html_asset_report_html=src/output/html/report.html \
	  html_asset_report_css=src/output/html/report.css html_asset_report_js=src/output/html/report.js

build/release/gen/html_assets.o: $(HTML_ASSETS_C) src/output/html_assets.h
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_COMMON) $(CFLAGS) -c -o $@ $<

build/asan/gen/html_assets.o: $(HTML_ASSETS_C) src/output/html_assets.h
	@mkdir -p $(dir $@)
	@echo "  CC/SAN  $<"
	@$(CC) $(CFLAGS_COMMON) $(SAN_FLAGS) -c -o $@ $<

build/release/unit/%: tests/unit/%.c $(UNIT_HELPERS) $(OBJ)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS_COMMON) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_HELPERS) $(OBJ) $(LIBS)

build/asan/unit/%: tests/unit/%.c $(UNIT_HELPERS) $(SAN_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS_COMMON) $(SAN_FLAGS) -Itests/unit -o $@ $< $(UNIT_HELPERS) $(SAN_OBJ) $(LIBS)

build/release/bench/bench_html: bench/bench_html.c $(OBJ)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS_COMMON) $(CFLAGS) -o $@ $< $(OBJ) $(LIBS)

# The agent's look alone, for bench/bench_agent.py --floor.
build/release/bench/look_floor: bench/look_floor.c $(OBJ)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS_COMMON) $(CFLAGS) -o $@ $< $(OBJ) $(LIBS)

# A synthesized 10-minute recording of 50 threads at 100 Hz, written as HTML
# and opened in headless Chromium (installed by make test-deps).
bench-html: build/release/bench/bench_html
	@mkdir -p build/bench
	@build/release/bench/bench_html build/bench/report-600s-50threads.html 600 50
	@$(PYTHON_TEST) bench/bench_html.py build/bench/report-600s-50threads.html

build/release/consumers/make_samples: tests/consumers/make_samples.c $(OBJ)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS_COMMON) $(CFLAGS) -o $@ $< $(OBJ) $(LIBS)

# libFuzzer targets for the core-file and ELF parsers (tests/fuzz), each run
# for FUZZ_TIME seconds on a scratch copy of its seed corpus, with ASan+UBSan,
# a memory limit and a per-input timeout: any crash, leak, hang or excess
# memory fails the target.
FUZZ_CC   ?= clang
FUZZ_TIME ?= 20
# The library is compiled once, instrumented for the fuzzer but without its
# main (fuzzer-no-link), and linked into each target.
FUZZ_SAN   = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_FLAGS = -g -O1 -fsanitize=fuzzer-no-link $(FUZZ_SAN)
FUZZ_TARGETS = core elf
FUZZ_OBJ := $(LIB_SRC:%.c=build/fuzz/obj/%.o) build/fuzz/obj/gen/html_assets.o

build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC/FUZZ $<"
	@$(FUZZ_CC) $(CFLAGS_COMMON) $(FUZZ_FLAGS) -MMD -c -o $@ $<

build/fuzz/obj/gen/html_assets.o: $(HTML_ASSETS_C) src/output/html_assets.h
	@mkdir -p $(dir $@)
	@$(FUZZ_CC) $(CFLAGS_COMMON) $(FUZZ_FLAGS) -c -o $@ $<

# Reached only through pattern rules: without this, make would delete them
# as intermediate files after each run.
.SECONDARY: $(FUZZ_OBJ) $(FUZZ_TARGETS:%=build/fuzz/fuzz_%) $(UNIT_BIN) $(UNIT_SAN_BIN)

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJ)
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	@$(FUZZ_CC) $(CFLAGS_COMMON) -g -O1 -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $< $(FUZZ_OBJ) $(LIBS)

fuzz: $(FUZZ_TARGETS:%=fuzz-%)

fuzz-%: build/fuzz/fuzz_%
	@rm -rf build/fuzz/corpus-$*; mkdir -p build/fuzz/corpus-$*
	@cp tests/fuzz/corpus/$*/* build/fuzz/corpus-$*/
	@echo "fuzzing $* for $(FUZZ_TIME)s"
	@build/fuzz/fuzz_$* -max_total_time=$(FUZZ_TIME) -rss_limit_mb=2048 -timeout=10 \
	    -max_len=262144 -artifact_prefix=build/fuzz/crash-$*- build/fuzz/corpus-$* \
	    2>build/fuzz/fuzz-$*.log || { tail -40 build/fuzz/fuzz-$*.log; exit 1; }
	@grep -E "^#[0-9]+.*DONE" build/fuzz/fuzz-$*.log | tail -1 | sed 's/^/$*: /'

# Installs the missing Debian packages of a list when run as root; otherwise
# prints the line to run.
define install_debs
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null || exit 1; \
	  else echo "pyscope needs:$$missing"; echo "run: sudo apt-get install -y$$missing"; exit 1; fi; \
	fi
endef

deps:
	$(call install_debs,$(DEB_PACKAGES))

test-deps:
	$(call install_debs,$(DEB_PACKAGES) $(TEST_DEB_PACKAGES))

# Each unit test binary is its own target, so `make -jN unit` runs them side by side.
unit: $(UNIT_BIN:%=%.run)
unit-asan: $(UNIT_SAN_BIN:%=%.run)

build/release/unit/%.run: build/release/unit/%
	@$<

build/asan/unit/%.run: build/asan/unit/%
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $<

# The integration suite: everything not marked serial under xdist, then the
# serial tests alone. Each run leaves a JUnit file for the summary.
integration: pyscope
	@mkdir -p $(RESULTS)
	PYSCOPE=$(CURDIR)/pyscope $(PYTEST) -n $(XDIST_WORKERS) -m "not serial" \
	  --junitxml=$(RESULTS)/integration.xml tests/integration

integration-serial: pyscope
	@mkdir -p $(RESULTS)
	PYSCOPE=$(CURDIR)/pyscope $(PYTEST) -m serial --junitxml=$(RESULTS)/integration-serial.xml tests/integration

# Timing tests are left out under ASan: its slowdown is what they would measure.
integration-asan: build/asan/pyscope
	@mkdir -p $(RESULTS)
	PYSCOPE=$(CURDIR)/build/asan/pyscope PYSCOPE_INTERPRETERS=$(ASAN_INTERPRETERS) \
	  PYSCOPE_FIELD_INTERPRETERS=debian-3.15 $(ASAN_ENV) \
	  $(PYTEST) -n $(XDIST_WORKERS) -m "not serial" --junitxml=$(RESULTS)/integration-asan.xml tests/integration

test-build: pyscope build/asan/pyscope $(UNIT_BIN) $(UNIT_SAN_BIN) $(FUZZ_TARGETS:%=build/fuzz/fuzz_%) \
            build/release/consumers/make_samples

# Stages run one after another (each may use every CPU); a failing stage
# does not stop the later ones, so one run shows every failure. The table
# of stage times and slowest tests comes last.
test: test-deps consumers-deps
	@rm -rf $(RESULTS); mkdir -p $(RESULTS)
	@sh tests/run_stage.sh $(RESULTS) build $(MAKE) -j$$(nproc) test-build
	@sh tests/run_stage.sh $(RESULTS) unit-and-fuzz $(MAKE) -j$$(nproc) -k unit unit-asan fuzz
	@sh tests/run_stage.sh $(RESULTS) consumers $(MAKE) consumers
	@sh tests/run_stage.sh $(RESULTS) integration $(MAKE) integration
	@sh tests/run_stage.sh $(RESULTS) integration-serial $(MAKE) integration-serial
	@sh tests/run_stage.sh $(RESULTS) integration-asan $(MAKE) integration-asan
	@$(PYTHON_TEST) tests/test_summary.py $(RESULTS)

# The edit loop: one old and one new interpreter, release build only.
test-quick: pyscope
	@rm -rf $(RESULTS); mkdir -p $(RESULTS)
	@sh tests/run_stage.sh $(RESULTS) unit $(MAKE) -j$$(nproc) unit
	@sh tests/run_stage.sh $(RESULTS) integration env PYSCOPE=$(CURDIR)/pyscope \
	  PYSCOPE_INTERPRETERS=$(QUICK_INTERPRETERS) $(PYTEST) -n $(XDIST_WORKERS) -m "not serial" \
	  --junitxml=$(RESULTS)/integration.xml tests/integration
	@$(PYTHON_TEST) tests/test_summary.py $(RESULTS)

# go and npm are found by command rather than by package: a Node.js from
# elsewhere (e.g. NodeSource, which bundles npm) is as good as Debian's.
consumers-deps:
	@missing=""; \
	command -v go >/dev/null 2>&1 || missing="$$missing $(CONSUMER_DEB_GO)"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing $(CONSUMER_DEB_NODE)"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null || exit 1; \
	  else echo "make consumers needs:$$missing"; echo "run: sudo apt-get install -y$$missing"; exit 1; fi; \
	fi
	@if [ ! -f $(CONSUMER_NODE_DIR)/node_modules/speedscope/package.json ] || \
	    [ ! -f $(CONSUMER_NODE_DIR)/node_modules/ajv/package.json ]; then \
	  echo "  NPM     $(CONSUMER_NPM) -> $(CONSUMER_NODE_DIR)"; mkdir -p $(CONSUMER_NODE_DIR); \
	  npm install --silent --no-audit --no-fund --prefix $(CONSUMER_NODE_DIR) $(CONSUMER_NPM) || exit 1; \
	fi

consumers: consumers-deps build/release/consumers/make_samples
	@rm -rf $(SAMPLES_DIR)
	@build/release/consumers/make_samples $(SAMPLES_DIR)
	@sh tests/consumers/check_pprof.sh $(SAMPLES_DIR)/profile.pb.gz compute dumps parse numpy_op '<GC>'
	@sh tests/consumers/check_pprof.sh $(SAMPLES_DIR)/profile-threads-idle.pb.gz \
	  '<module>' '_wait_for_tstate_lock' 'thread 4242 "MainThread"'
	@sh tests/consumers/check_pprof.sh $(SAMPLES_DIR)/profile-gil.pb.gz compute dumps
	@NODE_PATH=$(CURDIR)/$(CONSUMER_NODE_DIR)/node_modules node tests/consumers/speedscope_import.js \
	  $(SAMPLES_DIR)/profile.speedscope.json $(SAMPLES_DIR)/profile-idle.speedscope.json
	@for f in $(SAMPLES_DIR)/profile.chrome.json $(SAMPLES_DIR)/profile-idle.chrome.json; do \
	  $(PYTHON_TEST) tests/consumers/check_chrome_trace.py --pyscope $$f || exit 1; done
	@$(PYTHON_TEST) -c 'import json, sys; d = json.load(open(sys.argv[1])); \
	  print(sys.argv[1] + ": json OK: " + ", ".join(f"{len(d[k])} {k}" for k in ("frames", "stacks", "threads", "samples", "timeline")))' \
	  $(SAMPLES_DIR)/profile.json
	@echo "consumers: all sample files read back"

demo: deps pyscope
	@sh tests/demo/run_demo.sh ./pyscope

# The notebook module (python/pyscope: %load_ext pyscope) goes to
# PREFIX/share/pyscope/python, told where the binary is. With PYTHON=/path/to/python
# a pyscope.pth in that interpreter's site-packages puts it on its sys.path;
# otherwise set PYTHONPATH to that directory (docs/html.md).
PYSCOPE_PYTHON_DIR = $(PREFIX)/share/pyscope/python

install: pyscope
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 pyscope $(DESTDIR)$(PREFIX)/bin/pyscope
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR)
	sed 's|@BINDIR@|$(PREFIX)/bin|g' dist/systemd/pyscope-agent.service.in \
	  >$(DESTDIR)$(SYSTEMD_UNIT_DIR)/pyscope-agent.service
	chmod 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/pyscope-agent.service
	@if [ -f docs/pyscope.1 ]; then install -d $(DESTDIR)$(PREFIX)/share/man/man1 && \
	  install -m 0644 docs/pyscope.1 $(DESTDIR)$(PREFIX)/share/man/man1/pyscope.1; fi
	install -d $(DESTDIR)$(PYSCOPE_PYTHON_DIR)/pyscope
	install -m 0644 python/pyscope/__init__.py $(DESTDIR)$(PYSCOPE_PYTHON_DIR)/pyscope/__init__.py
	printf '# Written by make install.\nBINARY = %s\n' "'$(PREFIX)/bin/pyscope'" \
	  >$(DESTDIR)$(PYSCOPE_PYTHON_DIR)/pyscope/_install.py
	@if [ -n "$(PYTHON)" ]; then \
	  site=$$("$(PYTHON)" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || exit 1; \
	  install -d "$(DESTDIR)$$site" && echo "$(PYSCOPE_PYTHON_DIR)" >"$(DESTDIR)$$site/pyscope.pth" && \
	  echo "notebooks: $$site/pyscope.pth puts $(PYSCOPE_PYTHON_DIR) on $(PYTHON)'s path"; \
	else \
	  echo "notebooks: PYTHONPATH=$(PYSCOPE_PYTHON_DIR), or make install PYTHON=/path/to/python (docs/html.md)"; \
	fi

clean:
	rm -rf build pyscope

-include $(shell find build -name '*.d' 2>/dev/null)
