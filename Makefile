# pyscope: build, test, demo, install.
#   make            build ./pyscope
#   make demo       build, start the bundled demo program and dump it
#   make test       unit tests, consumer checks, integration tests, and both again under ASan+UBSan
#   make consumers  profile output read by its real consumers (go tool pprof, speedscope's schema)
#   make bench-html size and opening time of the HTML report of 10 minutes x 50 threads
#   make install PREFIX=/usr/local [PYTHON=/path/to/python]   (PYTHON: for %load_ext pyscope)

CC      ?= gcc
PREFIX  ?= /usr/local
PYTHON_TEST ?= /usr/bin/python3
# Tests that compare timings with what the kernel shows (GIL hand-offs, thread
# states) can lose a race on a loaded machine; a failure must repeat to count.
PYTEST_RERUNS ?= --reruns 2 --reruns-delay 1
CFLAGS_COMMON = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Isrc
CFLAGS  ?= -O2 -g
# elfutils and the compression libraries it reads debug sections with are
# linked from Debian's static archives: loading and relocating the shared
# ones was a tenth of a dump's wall time. glibc stays shared.
LIBS    = -Wl,-Bstatic -ldw -lelf -lz -llzma -lbz2 -Wl,-Bdynamic
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

DEB_PACKAGES = gcc make libelf-dev libdw-dev zlib1g-dev liblzma-dev libbz2-dev python3-pytest python3-pytest-rerunfailures \
               patchelf \
               gdb python3.11-dev python3.11-dbg clang libclang-rt-14-dev
# `make test` only: headless Chromium, which opens the HTML report in
# tests/integration/test_html.py; tmux, the terminal tests/integration/test_top.py
# runs `pyscope top` in.
TEST_DEB_PACKAGES = chromium tmux

# `make consumers` and `make test` (whose record tests use them too): go for
# `go tool pprof`, node and npm for speedscope's schema check; the npm
# packages go under build/, never into the tree.
CONSUMER_DEB_GO   = golang-go
CONSUMER_DEB_NODE = nodejs npm
CONSUMER_NPM      = speedscope@1.25.0 ajv@8.20.0
CONSUMER_NODE_DIR = build/consumers/npm
SAMPLES_DIR       = build/consumers/samples

.PHONY: all asan deps test-deps unit unit-asan integration integration-asan fuzz test demo install \
        clean consumers consumers-deps bench-html

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
FUZZ_FLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TARGETS = core elf

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(LIB_SRC) $(HTML_ASSETS_C)
	@mkdir -p $(dir $@)
	@echo "  FUZZ    $@"
	@$(FUZZ_CC) $(CFLAGS_COMMON) $(FUZZ_FLAGS) -o $@ $< $(LIB_SRC) $(HTML_ASSETS_C) $(LIBS)

fuzz: $(FUZZ_TARGETS:%=build/fuzz/fuzz_%)
	@set -e; for t in $(FUZZ_TARGETS); do \
	  rm -rf build/fuzz/corpus-$$t; mkdir -p build/fuzz/corpus-$$t; \
	  cp tests/fuzz/corpus/$$t/* build/fuzz/corpus-$$t/; \
	  echo "fuzzing $$t for $(FUZZ_TIME)s"; \
	  build/fuzz/fuzz_$$t -max_total_time=$(FUZZ_TIME) -rss_limit_mb=2048 -timeout=10 \
	    -max_len=262144 -artifact_prefix=build/fuzz/crash-$$t- build/fuzz/corpus-$$t \
	    2>build/fuzz/fuzz-$$t.log || { tail -40 build/fuzz/fuzz-$$t.log; exit 1; }; \
	  grep -E "^#[0-9]+.*DONE" build/fuzz/fuzz-$$t.log | tail -1; \
	done

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

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do $$t; done

unit-asan: $(UNIT_SAN_BIN)
	@set -e; for t in $(UNIT_SAN_BIN); do ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $$t; done

integration: pyscope
	PYSCOPE=$(CURDIR)/pyscope $(PYTHON_TEST) -m pytest -q $(PYTEST_RERUNS) tests/integration

integration-asan: build/asan/pyscope
	PYSCOPE=$(CURDIR)/build/asan/pyscope ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $(PYTHON_TEST) -m pytest -q $(PYTEST_RERUNS) tests/integration

test: test-deps consumers-deps
	$(MAKE) unit unit-asan
	$(MAKE) fuzz
	$(MAKE) consumers
	$(MAKE) integration
	$(MAKE) integration-asan

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
