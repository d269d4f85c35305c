# distref — GNU make, C11.
#
#   make              bin/distref and lib/libdistref.a
#   make test         cmocka unit tests (+ the mutants they must catch)
#   make conformance  the main job: variants against ref/, report in reports/
#   make conformance-mutants  the planted faults each suite must catch
#                     (run by make test), fault matrix in reports/mutants/
#   make bench        micro and end-to-end benchmarks, ratios against baselines
#   make nightly      regression run: samples into reports/bench/history.jsonl,
#                     compared with earlier runs (BASELINE=<rev>), docs/NIGHTLY.md
#   make SANITIZE=1   the same with AddressSanitizer + UndefinedBehaviorSanitizer,
#                     built apart: build/san/bin/distref, never bin/distref
#   make fuzz         libFuzzer targets (clang), FUZZ_SECONDS each (fuzz/README.md)
#   make WERROR=1     warnings are errors (CI sets CI=true, which implies it)
#
# Every C file is compiled with -ffp-contract=off: an implicit a*b+c -> fma
# would change bits between compilers and break the determinism contract.
# Never add -ffast-math.

# gcc, whatever `cc` is: GNU make's built-in default for CC is `cc`, which
# `?=` would keep, and on a machine with clang as `cc` the build would need
# clang's OpenMP (libomp-dev). gcc brings libgomp; scripts/deps.sh installs it.
ifeq ($(origin CC),default)
CC      = gcc
endif
OPT     ?= -O2
CFLAGS_COMMON = -std=c11 $(OPT) -g -ffp-contract=off -fno-math-errno -fopenmp \
                -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes \
                -D_POSIX_C_SOURCE=200809L -Iinclude -I. \
                $(shell pkg-config --cflags json-c openblas 2>/dev/null)
LDLIBS_COMMON = $(shell pkg-config --libs json-c openblas 2>/dev/null || echo -ljson-c -lopenblas) -lOpenCL -lz -lm -lpthread -fopenmp
# Open MPI (--variant=mpi, devices/mpi/comm_mpi.c): its headers and libmpi, from
# mpicc's own wrapper data. Every program links libmpi; only --variant=mpi
# calls MPI_Init (docs/MPI.md).
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null || pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null || pkg-config --libs ompi-c 2>/dev/null || echo -lmpi)
CFLAGS_COMMON += $(MPI_CFLAGS)
LDLIBS_COMMON += $(MPI_LIBS)

ifeq ($(CI),true)
WERROR ?= 1
endif
ifeq ($(WERROR),1)
CFLAGS_COMMON += -Werror
endif

ifeq ($(SANITIZE),1)
MODE    = san
CFLAGS_COMMON += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
else
MODE    = rel
endif

CFLAGS  += $(CFLAGS_COMMON)
BUILD   = build/$(MODE)

# The library, one folder per layer and one archive per layer
# (docs/ARCHITECTURE.md):
#
#   core        core/                  numerics, RNG, data, flags, TF_CONFIG, formats, specs
#   ref         ref/                   the oracle: imports core only
#   engine      strategies/ devices/   the optimized variants: import core only
#   harness     harness/               the training loop and the variant registry: imports all
#
# Each layer's files are compiled with -DDR_LAYER_<name>; a header of a
# layer that file may not import #errors, so an upward or sideways include
# fails to build. `make check-layers` also reads every include (naming file
# and line) and links each archive against the archives below it only.
CORE_SRC    = $(wildcard core/*.c)
REF_SRC     = $(wildcard ref/*.c)
ENGINE_SRC  = $(wildcard strategies/*.c devices/*/*.c)
HARNESS_SRC = $(wildcard harness/*.c)
LAYERS      = core ref engine harness
LIB_SRC  = $(CORE_SRC) $(REF_SRC) $(ENGINE_SRC) $(HARNESS_SRC)
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o)
CORE_A    = $(BUILD)/libcore.a
REF_A     = $(BUILD)/libref.a
ENGINE_A  = $(BUILD)/libengine.a
HARNESS_A = $(BUILD)/libharness.a
# Link order: each archive before the ones it imports.
LAYER_LIBS = $(HARNESS_A) $(ENGINE_A) $(REF_A) $(CORE_A)
# Tests and benches link their mode's own archives, never the other mode's.
# The release build installs bin/ and lib/; the sanitizer build keeps its
# programs under build/san/ so that neither can overwrite the other's.
MODE_LIB = $(BUILD)/libdistref.a
ifeq ($(MODE),rel)
BINDIR   = bin
LIB      = lib/libdistref.a
else
BINDIR   = $(BUILD)/bin
LIB      = $(MODE_LIB)
endif
CLI      = $(BINDIR)/distref
# Tests and conformance run the CLI of their own build.
BIN_FLAG = -DDR_BIN='"$(CLI)"' -DDR_CONF_BIN='"$(CONF_BIN)"'


$(CORE_SRC:%.c=$(BUILD)/%.o):    LAYER_FLAG = -DDR_LAYER_CORE
$(REF_SRC:%.c=$(BUILD)/%.o):     LAYER_FLAG = -DDR_LAYER_REF
$(ENGINE_SRC:%.c=$(BUILD)/%.o):  LAYER_FLAG = -DDR_LAYER_ENGINE
$(HARNESS_SRC:%.c=$(BUILD)/%.o): LAYER_FLAG = -DDR_LAYER_HARNESS

TEST_SRC = $(wildcard tests/test_*.c)
TEST_BIN = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_LIBS = $(shell pkg-config --libs cmocka mpfr 2>/dev/null || echo -lcmocka -lmpfr) -lgmp
# tests/test_report.c links the conformance report's objects (and its
# skip_as_pass mutant, scripts/exact_mutants.sh, these beside verdict.c's)
REPORT_OBJ = $(BUILD)/conformance/report.o $(BUILD)/conformance/report_matrix.o $(BUILD)/conformance/outfile.o

BENCH_SRC = $(wildcard bench/bench_*.c)
BENCH_BIN = $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
BLAS_CFLAGS = $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   = $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)

.DEFAULT_GOAL := all
.PHONY: deps clean FORCE
# Every target a user types first installs what is missing (make deps), then
# runs make again for the work (the in-NAME target): the sub-make reads this
# Makefile anew, so every $(shell pkg-config ...) and `mpicc --showme` above
# sees the packages deps has just installed. Evaluated by this make, before
# deps ran, they would be empty on a fresh machine, and every compile in a
# recipe or a script it calls would lack mpi.h (issue 26;
# scripts/fresh_machine.sh proves the order in a bare Debian root).
PUBLIC = all test conformance conformance-mutants examples bench nightly bench-peer \
         mutant-cli tf-crosscheck fuzz mutants check-layers check-faults
.PHONY: $(PUBLIC) $(PUBLIC:%=in-%)
$(PUBLIC): %: deps
	@$(MAKE) --no-print-directory in-$*

in-all: $(CLI) $(LIB)

deps:
	@sh scripts/deps.sh

# Rebuild a mode's objects when its flags change.
$(BUILD)/.flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(CFLAGS) $(LDFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS) $(LDFLAGS)' > $@
FORCE:

# The OpenCL program's sources are read from this checkout at run time
# (docs/OPENCL.md); a per-file flag, so that it never enters .flags or the
# mutant scripts' CFLAGS (those builds run from the checkout: "." is it).
$(BUILD)/devices/opencl/opencl_program.o: FILE_FLAGS = -DDR_SOURCE_ROOT='"$(CURDIR)"'

# openmp_conv.c's im2col and input-gradient gather copy runs of a few taps
# of a few channels (3 to 48 floats in resnet_synthetic) in vector loops;
# gcc would turn those loops back into memmove/memset calls, which cost more
# than the copies (perf, fast resnet_synthetic G = 32: a fifth of the step).
$(BUILD)/devices/cpu/openmp_conv.o: FILE_FLAGS = -fno-tree-loop-distribute-patterns

$(BUILD)/%.o: %.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LAYER_FLAG) $(FILE_FLAGS) -MMD -MP -c $< -o $@

$(CORE_A): $(CORE_SRC:%.c=$(BUILD)/%.o)
$(REF_A): $(REF_SRC:%.c=$(BUILD)/%.o)
$(ENGINE_A): $(ENGINE_SRC:%.c=$(BUILD)/%.o)
$(HARNESS_A): $(HARNESS_SRC:%.c=$(BUILD)/%.o)
$(LAYER_LIBS):
	@rm -f $@
	@ar rcs $@ $^

# lib/libdistref.a for users: every layer in one archive.
$(MODE_LIB): $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $(LIB_OBJ)

# The layer rules, read from the includes (imports; private headers stay in
# their layer) and proven by linking each layer against the archives below
# it only (an empty main, every object forced in); then the include check's
# own test, planted violations it must refuse (scripts/test_check_layers.sh).
in-check-layers: $(LAYER_LIBS)
	@sh scripts/check_layers.sh
	@sh scripts/test_check_layers.sh > $(BUILD)/test_check_layers.out 2>&1 || { cat $(BUILD)/test_check_layers.out; exit 1; }
	@tail -n 1 $(BUILD)/test_check_layers.out
	@printf 'int main(void) { return 0; }\n' > $(BUILD)/empty_main.c
	@$(CC) -o $(BUILD)/link_core $(BUILD)/empty_main.c -Wl,--whole-archive $(CORE_A) -Wl,--no-whole-archive $(LDFLAGS) $(LDLIBS_COMMON)
	@$(CC) -o $(BUILD)/link_ref $(BUILD)/empty_main.c -Wl,--whole-archive $(REF_A) -Wl,--no-whole-archive $(CORE_A) $(LDFLAGS) $(LDLIBS_COMMON)
	@$(CC) -o $(BUILD)/link_engine $(BUILD)/empty_main.c -Wl,--whole-archive $(ENGINE_A) -Wl,--no-whole-archive $(CORE_A) $(LDFLAGS) $(LDLIBS_COMMON)
	@echo "check-layers: core <- ref, core <- engine, all <- harness: includes and links OK"

ifeq ($(MODE),rel)
$(LIB): $(MODE_LIB)
	@mkdir -p lib
	cp $(MODE_LIB) $@
endif

# --version's git revision (include/distref/version.h): the header is
# rewritten only when the revision changes, and cli/main.o rebuilt with it.
$(BUILD)/revision.h: FORCE
	@mkdir -p $(BUILD)
	@r=$$(git rev-parse --short=12 HEAD 2>/dev/null)$$(git diff --quiet HEAD -- 2>/dev/null || echo +dirty); \
	 line="#define DR_GIT_REVISION \"$${r:-unknown}\""; echo "$$line" | cmp -s - $@ || echo "$$line" > $@
$(BUILD)/cli/main.o: $(BUILD)/revision.h
$(BUILD)/cli/main.o: FILE_FLAGS = -include $(BUILD)/revision.h

$(CLI): $(BUILD)/cli/main.o $(LAYER_LIBS)
	@mkdir -p $(BINDIR)
	$(CC) $(LDFLAGS) -o $@ $< $(LAYER_LIBS) $(LDLIBS_COMMON)

$(BUILD)/tests/%: tests/%.c $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BIN_FLAG) -MMD -MP $(LDFLAGS) -o $@ $< $(LAYER_LIBS) $(TEST_LIBS) $(LDLIBS_COMMON)

# The exact-numerics tests again against the portable exact sums alone
# (core/reduce.c without its AVX-512 kernels): the same bits either way.
PORTABLE_TEST = $(BUILD)/tests/test_exact_portable
$(PORTABLE_TEST): tests/test_exact.c core/reduce.c $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DDR_LAYER_CORE -DDR_EXACT_NO_SIMD -c core/reduce.c -o $(BUILD)/tests/reduce_portable.o
	$(CC) $(CFLAGS) $(BIN_FLAG) -DDR_EXACT_NO_SIMD $(LDFLAGS) -o $@ $< $(BUILD)/tests/reduce_portable.o \
	    $(LAYER_LIBS) $(TEST_LIBS) $(LDLIBS_COMMON)

# The exact GEMM's tests again as on a CPU without AVX-512 VNNI
# (devices/cpu/cpu_gemm_crt.c and cpu_gemm_vnni.c built with -DDR_NO_VNNI): the
# public entry points take DGEMM, the plain C residue path still runs.
NOVNNI_TEST = $(BUILD)/tests/test_fastgemm_novnni
$(NOVNNI_TEST): tests/test_fastgemm.c devices/cpu/cpu_gemm_crt.c devices/cpu/cpu_gemm_vnni.c $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DDR_LAYER_ENGINE -DDR_NO_VNNI -c devices/cpu/cpu_gemm_crt.c -o $(BUILD)/tests/cpu_gemm_crt_novnni.o
	$(CC) $(CFLAGS) -DDR_LAYER_ENGINE -DDR_NO_VNNI -c devices/cpu/cpu_gemm_vnni.c -o $(BUILD)/tests/cpu_gemm_vnni_novnni.o
	$(CC) $(CFLAGS) $(BIN_FLAG) $(LDFLAGS) -o $@ $< $(BUILD)/tests/cpu_gemm_crt_novnni.o \
	    $(BUILD)/tests/cpu_gemm_vnni_novnni.o $(LAYER_LIBS) $(TEST_LIBS) $(LDLIBS_COMMON)

# Mutants: the exact-numerics tests rebuilt against deliberately wrong
# implementations (tests/mutants.h). Each must FAIL, or the tests prove nothing.
# Every planted fault, these included, is a row of tests/faults.tsv (the
# registry; scripts/faults.sh reads it, scripts/check_faults.sh checks it).
# NAMES="a b" limits the mutant scripts to those faults (make mutants,
# make conformance-mutants).
FAULT_NAMES = $(shell sh scripts/faults.sh names $(1))
MUTANTS = $(call FAULT_NAMES,unit)
MUTANT_BIN = $(MUTANTS:%=$(BUILD)/tests/mutant_%)
$(BUILD)/tests/mutant_%: tests/test_exact.c tests/mutants.h $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -DDR_MUTANT=$* -o $@ $< $(LAYER_LIBS) $(TEST_LIBS) $(LDLIBS_COMMON)

in-mutants: $(MUTANT_BIN) $(LAYER_LIBS) $(REPORT_OBJ)
	@sh scripts/run_mutants.sh $(MUTANT_BIN)
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(TEST_LIBS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    LIBS='$(LAYER_LIBS)' sh scripts/exact_mutants.sh $(NAMES)

# The registry against the sources' seams, docs/CONFORMANCE.md's fault table
# and the counts the docs state (static, seconds), every sed patch's file
# compiled with its patch (--compile, 15 s), and the check's own planted
# disagreements (--self-test).
in-check-faults:
	@sh scripts/check_faults.sh
	@CC='$(CC)' CFLAGS='$(CFLAGS)' sh scripts/check_faults.sh --compile
	@CC='$(CC)' CFLAGS='$(CFLAGS)' sh scripts/check_faults.sh --self-test

in-test:
	@$(MAKE) --no-print-directory in-check-layers in-check-faults $(CLI) $(TEST_BIN) $(PORTABLE_TEST) $(NOVNNI_TEST) $(MUTANT_BIN) $(NIGHTLY_BIN) $(NIGHTLY_MPI_BIN) $(CONF_BIN) $(MPI_CHECK) $(MPI_CHECK_MUT)
	@sh scripts/run_tests.sh $(TEST_BIN) $(PORTABLE_TEST) $(NOVNNI_TEST)
	@sh tests/mpi_native.sh $(MPI_CHECK) $(MPI_CHECK_MUT_RUN)
	@sh scripts/test_nightly.sh $(NIGHTLY_BIN) $(NIGHTLY_MPI_BIN) $(CONF_BIN)
	@sh scripts/test_tensorboard.sh $(CLI)
	@sh scripts/test_doc_numbers.sh
	@sh scripts/test_check_sizes.sh
	@sh scripts/test_netns_lock.sh
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/test_python_mutants.sh $(CLI)
	@$(MAKE) --no-print-directory test-judge-mutant
	@sh scripts/run_mutants.sh $(MUTANT_BIN)
	@CC='$(CC)' CFLAGS='$(CFLAGS) -MMD -MP' LDLIBS='$(LDFLAGS) $(TEST_LIBS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    LIBS='$(LAYER_LIBS)' sh scripts/golden_mutants.sh
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(TEST_LIBS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    LIBS='$(LAYER_LIBS)' sh scripts/exact_mutants.sh
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(TEST_LIBS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    LIBS='$(LAYER_LIBS)' sh scripts/cli_mutants.sh
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/test_mpi_ps_rerun.sh $(CLI) 2
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/test_mpi_shards.sh $(CLI)
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/test_mpi_ckpt_kill.sh $(CLI) 3
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/test_mpi_fewer_hosts.sh $(CLI)
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/test_mpi_kill_host.sh $(CLI)
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/test_netns_netem.sh $(CLI)
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/test_durability.sh $(CLI) 1
	@$(MAKE) --no-print-directory in-conformance-mutants

$(BUILD)/bench/%: bench/%.c $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) $(LDFLAGS) -o $@ $< $(LAYER_LIBS) $(BLAS_LIBS) $(LDLIBS_COMMON)

# The MPI comm against MPI_Allreduce (nccl-tests style), under mpirun -np 2
# and 4 (scripts/run_bench.sh: MPI_BENCH).
MPI_BENCH = $(BUILD)/bench/mpi_allreduce
$(MPI_BENCH): bench/mpi_allreduce.c $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LAYER_LIBS) $(LDLIBS_COMMON)

# The compact all-reduce across MPI ranks, ring and native, against
# independent totals (tests/mpi_native.sh runs it under mpirun -np 2..4).
MPI_CHECK = $(BUILD)/tests/mpi_native_check
$(MPI_CHECK): tests/mpi_native_check.c $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LAYER_LIBS) $(LDLIBS_COMMON)
# The same check against the exact float all-reduce's planted faults
# (devices/mpi/comm_mpi_f32x.c, tests/mpi_native.sh): each must fail it.
# The registry's kind mpi_native rows: name mpi_X builds
# mpi_native_check_X, run on the row's np=N ranks.
MPI_CHECK_MUT = $(patsubst mpi_%,$(BUILD)/mpi_mutants/mpi_native_check_%,$(call FAULT_NAMES,mpi_native))
MPI_CHECK_MUT_RUN = $(shell sh scripts/faults.sh rows mpi_native | \
    awk -F'\t' '{ sub(/^np=/, "", $$7); sub(/^mpi_/, "", $$1); print $$7 ":$(BUILD)/mpi_mutants/mpi_native_check_" $$1 }')
$(BUILD)/mpi_mutants/mpi_native_check_%: tests/mpi_native_check.c devices/mpi/comm_mpi_f32x.c devices/mpi/comm_mpi_gradx.c devices/seams.h tests/faults.tsv $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DDR_LAYER_ENGINE -D$(shell sh scripts/faults.sh get mpi_$* macro) -c $(shell sh scripts/faults.sh get mpi_$* files) -o $@.o
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $@.o $(LAYER_LIBS) $(LDLIBS_COMMON)

in-bench: $(CLI) $(BENCH_BIN) $(MPI_BENCH)
	@DISTREF=$(CLI) MPI_BENCH=$(MPI_BENCH) sh scripts/run_bench.sh $(BENCH_BIN)

# Nightly regression runs (docs/NIGHTLY.md): a release build of
# bench/nightly.c (interleaved samples of ratios against in-run baselines),
# then scripts/nightly.py: appends to reports/bench/history.jsonl, writes a
# Google Benchmark JSON and JUnit XML, compares with the earlier runs (or
# BASELINE=<rev>) by Mann-Whitney U and a minimum effect, plots the history.
# Exits non-zero naming each regressed metric.
# The MPI all-reduce rows come from bench/nightly_mpi.c under mpirun -np 2,
# the per-variant conformance CPU seconds (over a calibration workload,
# $(NIGHTLY_BIN) --calibrate, run before and after each slice), wall time
# and peak RSS from bin/conformance's slices (CONF_SAMPLES runs each; 0
# leaves them out).
NIGHTLY_BIN = $(BUILD)/bench/nightly
NIGHTLY_MPI_BIN = $(BUILD)/bench/nightly_mpi
SAMPLES ?= 15
CONF_SAMPLES ?= 3
$(NIGHTLY_BIN): bench/nightly.c bench/bench_common.h bench/bench_cl_gemm.h $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) $(LDFLAGS) -o $@ $< $(LAYER_LIBS) $(BLAS_LIBS) $(LDLIBS_COMMON)
$(NIGHTLY_MPI_BIN): bench/nightly_mpi.c bench/bench_common.h $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LAYER_LIBS) $(LDLIBS_COMMON)

# REVS="a b c": one run per revision, each built in its own worktree
# (scripts/nightly_revs.sh), to backfill the history or bisect.
in-nightly:
	@test "$(MODE)" = rel || { echo "make nightly: release builds only (no SANITIZE=1)"; exit 2; }
ifeq ($(REVS),)
	@$(MAKE) --no-print-directory $(NIGHTLY_BIN) $(NIGHTLY_MPI_BIN) $(CLI) $(CONF_BIN)
	@python3 scripts/nightly.py run --bench $(NIGHTLY_BIN) --mpi-bench $(NIGHTLY_MPI_BIN) \
	    --conformance $(CONF_BIN) --conf-samples $(CONF_SAMPLES) --samples $(SAMPLES) \
	    --cflags '$(CC) $(CFLAGS)' $(if $(BASELINE),--baseline $(BASELINE),) $(if $(ONLY),--only $(ONLY),)
else
	@sh scripts/nightly_revs.sh '$(SAMPLES)' '$(ONLY)' '$(CC)' '$(CFLAGS) $(BLAS_CFLAGS)' '$(LDFLAGS) $(BLAS_LIBS) $(LDLIBS_COMMON)' $(REVS)
endif

# The PyTorch CPU peer (optional, needs the network once): torch from pip
# into build/torchvenv, then bench/peer_torch.py against distref's fast path.
TORCH_VENV = build/torchvenv
in-bench-peer: $(CLI)
	@test -x $(TORCH_VENV)/bin/python || python3 -m venv $(TORCH_VENV)
	@$(TORCH_VENV)/bin/python -c 'import torch' 2>/dev/null || $(TORCH_VENV)/bin/pip install -q torch \
	    --index-url https://download.pytorch.org/whl/cpu || $(TORCH_VENV)/bin/pip install -q torch
	@$(TORCH_VENV)/bin/python bench/peer_torch.py --distref $(CLI)

CONF_SRC = $(wildcard conformance/*.c)
CONF_OBJ = $(CONF_SRC:%.c=$(BUILD)/%.o)
CONF_BIN = $(BINDIR)/conformance
$(CONF_OBJ): CFLAGS += $(BIN_FLAG)
$(CONF_BIN): $(CONF_OBJ) $(LAYER_LIBS)
	@mkdir -p $(BINDIR)
	$(CC) $(LDFLAGS) -o $@ $(CONF_OBJ) $(LAYER_LIBS) $(LDLIBS_COMMON)

# The report's verdict book and outputs, tested on their own
# (tests/test_report.c: what did not run is never counted as passed).
$(BUILD)/tests/test_report: tests/test_report.c $(BUILD)/conformance/verdict.o $(REPORT_OBJ) $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BIN_FLAG) -MMD -MP $(LDFLAGS) -o $@ $< $(BUILD)/conformance/verdict.o $(REPORT_OBJ) \
	    $(LAYER_LIBS) $(TEST_LIBS) $(LDLIBS_COMMON)

# The runner's parallel lanes, tested on their own (tests/test_lanes.c:
# lanes give the serial book; a dead lane's unit is a failure).
$(BUILD)/tests/test_lanes: tests/test_lanes.c $(BUILD)/conformance/verdict.o $(BUILD)/conformance/lanes.o \
                           $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BIN_FLAG) -MMD -MP $(LDFLAGS) -o $@ $< $(BUILD)/conformance/verdict.o \
	    $(BUILD)/conformance/lanes.o $(LAYER_LIBS) $(TEST_LIBS) $(LDLIBS_COMMON)

# The main job: every variant of the registry against ref/;
# reports/out/index.html. PoCL is asked for two devices (unless POCL_DEVICES
# is set), so that the opencl variant's one-replica-per-device mapping runs
# (docs/OPENCL.md); other OpenCL platforms ignore the variable.
in-conformance: $(CLI) $(CONF_BIN)
	@POCL_DEVICES="$${POCL_DEVICES:-pthread pthread}" $(CONF_BIN) $(if $(FULL),--full,)

# The suites' own test: every planted fault as a mutant build that must fail
# the suite it targets (scripts/run_conformance_mutants.sh). make test runs
# it; the fault matrix, with the revision and date it was measured at, goes
# to reports/mutants/faults.dat, which make conformance never writes and its
# report shows. Each mutant runs only the suite it must fail;
# MUTANT_MATRIX=full runs every quick suite against each (2.5x the time).
in-conformance-mutants: $(CLI) $(CONF_BIN)
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' CONF_OBJ='$(CONF_OBJ)' \
	    MUTANT_MATRIX='$(MUTANT_MATRIX)' sh scripts/run_conformance_mutants.sh $(NAMES)

# bin/distref with one engine fault compiled in, to see what it does to a
# run (docs/TUTORIAL.md): make mutant-cli MUTANT=reg_not_scaled
in-mutant-cli: $(CLI)
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/mutant_cli.sh '$(MUTANT)'

# TensorFlow itself, live (optional, never part of make test): a virtualenv
# under build/ with tensorflow-cpu from pip, golden values made now from it
# (scripts/tf_golden.py), and tests/test_golden.c's comparison against them
# instead of the committed tests/golden/tensorflow.json; then TensorFlow's
# MirroredStrategy R = 1, 2, 4 trajectories judged by `distref diff`
# against distref's (scripts/tf_crosscheck.sh, docs/JUDGING.md).
TF_VENV = build/tfvenv
TF_STEPS ?= 200
in-tf-crosscheck: $(CLI) $(BUILD)/tests/test_golden
	@test -x $(TF_VENV)/bin/python || python3 -m venv $(TF_VENV)
	@$(TF_VENV)/bin/python -c 'import tensorflow' 2>/dev/null || $(TF_VENV)/bin/pip install -q tensorflow-cpu numpy
	@$(TF_VENV)/bin/python scripts/tf_golden.py generate $(BUILD)/golden_live.json
	@$(BUILD)/tests/test_golden --golden $(BUILD)/golden_live.json
	@DISTREF=$(CLI) sh scripts/tf_crosscheck.sh $(TF_VENV)/bin/python build/tf_crosscheck $(TF_STEPS)

# docs/JUDGING.md's engine-mutant diff, as a test (part of make test):
# bias_grad_axis named at step 1, dense_0/bias; the unmutated run identical.
test-judge-mutant: $(CLI)
	@CC='$(CC)' CFLAGS='$(CFLAGS)' LDLIBS='$(LDFLAGS) $(LDLIBS_COMMON)' BUILD='$(BUILD)' \
	    sh scripts/test_judge_mutant.sh $(CLI)
.PHONY: test-judge-mutant

# The Python package (python/, docs/JUDGING.md) in a virtualenv under build/,
# with NumPy from pip: make test then runs its tests (scripts/test_python.sh;
# without NumPy they are reported "not supported", never passed).
PY_VENV = build/pyvenv
python-venv:
	@test -x $(PY_VENV)/bin/python || python3 -m venv $(PY_VENV)
	@$(PY_VENV)/bin/pip install -q ./python
	@$(PY_VENV)/bin/python -c 'import distref, numpy; print("python-venv:", distref.__file__, "numpy", numpy.__version__)'
.PHONY: python-venv

# PyTorch DDP (gloo, CPU) judged by distref diff (optional, never part of
# make test): torch CPU into a virtualenv under build/, then
# examples/pytorch_ddp/crosscheck.sh (docs/JUDGING.md).
TORCH_VENV = build/torchvenv
TORCH_STEPS ?= 200
torch-crosscheck: $(CLI)
	@test -x $(TORCH_VENV)/bin/python || python3 -m venv $(TORCH_VENV)
	@$(TORCH_VENV)/bin/python -c 'import torch, numpy' 2>/dev/null || $(TORCH_VENV)/bin/pip install -q numpy torch
	@DISTREF=$(CLI) sh examples/pytorch_ddp/crosscheck.sh $(TORCH_VENV)/bin/python build/torch_crosscheck $(TORCH_STEPS)
.PHONY: torch-crosscheck

# libFuzzer targets in fuzz/ (clang, ASan + UBSan), each for FUZZ_SECONDS on
# a scratch copy of its seed corpus; fails on any crash (fuzz/README.md).
FUZZ_SECONDS ?= 30
in-fuzz:
	@sh scripts/fuzz.sh $(FUZZ_SECONDS)

# Teaching examples (examples/README.md): examples/NAME/NAME.c against the
# public headers and the layer archives, then every examples/*/run.sh, its
# output checked against the ```expected blocks of its README
# (scripts/run_examples.sh; a README with a changed digit must fail).
EXAMPLE_SRC = $(wildcard examples/*/*.c)
EXAMPLE_BIN = $(EXAMPLE_SRC:examples/%.c=$(BUILD)/examples/%)
$(BUILD)/examples/%: examples/%.c $(LAYER_LIBS) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $< $(LAYER_LIBS) $(LDLIBS_COMMON)
in-examples: $(CLI) $(EXAMPLE_BIN)
	@DISTREF=$(CLI) EXAMPLES_BIN=$(BUILD)/examples sh scripts/run_examples.sh
-include $(EXAMPLE_BIN:=.d)

clean:
	rm -rf build lib bin

-include $(LIB_OBJ:.o=.d) $(CONF_OBJ:.o=.d) $(BUILD)/cli/main.d $(TEST_BIN:=.d)
