# pyscope: build, test, demo, install.
#   make            build ./pyscope
#   make demo       build, start the bundled demo program and dump it
#   make test       unit tests, consumer checks, integration tests, and both again under ASan+UBSan
#   make consumers  profile output read by its real consumers (go tool pprof, speedscope's schema)
#   make install PREFIX=/usr/local

CC      ?= gcc
PREFIX  ?= /usr/local
PYTHON_TEST ?= /usr/bin/python3
CFLAGS_COMMON = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Isrc
CFLAGS  ?= -O2 -g
LIBS    = -lelf -ldw -lz
SAN_FLAGS = -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

SRC      := $(shell find src -name '*.c' | sort)
LIB_SRC  := $(filter-out src/main.c,$(SRC))
OBJ      := $(LIB_SRC:%.c=build/release/%.o)
SAN_OBJ  := $(LIB_SRC:%.c=build/asan/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_HELPERS := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=build/release/unit/%)
UNIT_SAN_BIN := $(UNIT_SRC:tests/unit/%.c=build/asan/unit/%)

DEB_PACKAGES = gcc make libelf-dev libdw-dev zlib1g-dev python3-pytest patchelf

# `make consumers` and `make test` (whose record tests use them too): go for
# `go tool pprof`, node and npm for speedscope's schema check; the npm
# packages go under build/, never into the tree.
CONSUMER_DEB_GO   = golang-go
CONSUMER_DEB_NODE = nodejs npm
CONSUMER_NPM      = speedscope@1.25.0 ajv@8.20.0
CONSUMER_NODE_DIR = build/consumers/npm
SAMPLES_DIR       = build/consumers/samples

.PHONY: all asan deps unit unit-asan integration integration-asan test demo install clean \
        consumers consumers-deps

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

build/release/unit/%: tests/unit/%.c $(UNIT_HELPERS) $(OBJ)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS_COMMON) $(CFLAGS) -Itests/unit -o $@ $< $(UNIT_HELPERS) $(OBJ) $(LIBS)

build/asan/unit/%: tests/unit/%.c $(UNIT_HELPERS) $(SAN_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS_COMMON) $(SAN_FLAGS) -Itests/unit -o $@ $< $(UNIT_HELPERS) $(SAN_OBJ) $(LIBS)

build/release/consumers/make_samples: tests/consumers/make_samples.c $(OBJ)
	@mkdir -p $(dir $@)
	@echo "  LINK    $@"
	@$(CC) $(CFLAGS_COMMON) $(CFLAGS) -o $@ $< $(OBJ) $(LIBS)

# Installs missing Debian packages when run as root; otherwise prints the line to run.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null || exit 1; \
	  else echo "pyscope needs:$$missing"; echo "run: sudo apt-get install -y$$missing"; exit 1; fi; \
	fi

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do $$t; done

unit-asan: $(UNIT_SAN_BIN)
	@set -e; for t in $(UNIT_SAN_BIN); do ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $$t; done

integration: pyscope
	PYSCOPE=$(CURDIR)/pyscope $(PYTHON_TEST) -m pytest -q tests/integration

integration-asan: build/asan/pyscope
	PYSCOPE=$(CURDIR)/build/asan/pyscope ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $(PYTHON_TEST) -m pytest -q tests/integration

test: deps consumers-deps
	$(MAKE) unit unit-asan
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

install: pyscope
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 pyscope $(DESTDIR)$(PREFIX)/bin/pyscope
	@if [ -f docs/pyscope.1 ]; then install -d $(DESTDIR)$(PREFIX)/share/man/man1 && \
	  install -m 0644 docs/pyscope.1 $(DESTDIR)$(PREFIX)/share/man/man1/pyscope.1; fi

clean:
	rm -rf build pyscope

-include $(shell find build -name '*.d' 2>/dev/null)
