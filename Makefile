# distref — GNU make, C11.
#
#   make              bin/distref and lib/libdistref.a
#   make test         cmocka unit tests (+ the mutants they must catch)
#   make conformance  the main job: variants against ref/, report in reports/
#   make bench        micro and end-to-end benchmarks, ratios against baselines
#   make SANITIZE=1   the same with AddressSanitizer + UndefinedBehaviorSanitizer
#   make WERROR=1     warnings are errors (CI sets CI=true, which implies it)
#
# Every C file is compiled with -ffp-contract=off: an implicit a*b+c -> fma
# would change bits between compilers and break the determinism contract.
# Never add -ffast-math.

CC      ?= gcc
OPT     ?= -O2
CFLAGS_COMMON = -std=c11 $(OPT) -g -ffp-contract=off -fno-math-errno -fopenmp \
                -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes \
                -D_POSIX_C_SOURCE=200809L -Iinclude -I. \
                $(shell pkg-config --cflags json-c openblas 2>/dev/null)
LDLIBS_COMMON = $(shell pkg-config --libs json-c openblas 2>/dev/null || echo -ljson-c -lopenblas) -lz -lm -fopenmp

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

# The library: everything but the CLI's main. One folder per layer.
LIB_DIRS = numerics common ref strategies devices
LIB_SRC  = $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB      = lib/libdistref.a
# Tests and benches link their mode's own archive, never the other mode's.
MODE_LIB = $(BUILD)/libdistref.a
CLI      = bin/distref

TEST_SRC = $(wildcard tests/test_*.c)
TEST_BIN = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_LIBS = $(shell pkg-config --libs cmocka mpfr 2>/dev/null || echo -lcmocka -lmpfr) -lgmp

BENCH_SRC = $(wildcard bench/bench_*.c)
BENCH_BIN = $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
BLAS_CFLAGS = $(shell pkg-config --cflags openblas 2>/dev/null)
BLAS_LIBS   = $(shell pkg-config --libs openblas 2>/dev/null || echo -lopenblas)

.PHONY: all deps test conformance bench clean mutants
all: deps
	@$(MAKE) --no-print-directory $(CLI) $(LIB)

deps:
	@sh scripts/deps.sh

# Rebuild a mode's objects when its flags change, and relink lib/ and bin/
# whenever the mode changes (they are shared by SANITIZE=1 and normal builds).
$(BUILD)/.flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(CFLAGS) $(LDFLAGS)' | cmp -s - $@ || echo '$(CC) $(CFLAGS) $(LDFLAGS)' > $@
build/.mode: FORCE
	@mkdir -p build
	@echo '$(MODE) $(CC) $(CFLAGS) $(LDFLAGS)' | cmp -s - $@ || echo '$(MODE) $(CC) $(CFLAGS) $(LDFLAGS)' > $@
FORCE:

$(BUILD)/%.o: %.c $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(MODE_LIB): $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $(LIB_OBJ)

$(LIB): $(MODE_LIB) build/.mode
	@mkdir -p lib
	cp $(MODE_LIB) $@

$(CLI): $(BUILD)/cli/main.o $(MODE_LIB) build/.mode
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $< $(MODE_LIB) $(LDLIBS_COMMON)

$(BUILD)/tests/%: tests/%.c $(MODE_LIB) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP $(LDFLAGS) -o $@ $< $(MODE_LIB) $(TEST_LIBS) $(LDLIBS_COMMON)

# Mutants: the exact-numerics tests rebuilt against deliberately wrong
# implementations (tests/mutants.h). Each must FAIL, or the tests prove nothing.
MUTANTS = naive_float double_accum
MUTANT_BIN = $(MUTANTS:%=$(BUILD)/tests/mutant_%)
$(BUILD)/tests/mutant_%: tests/test_exact.c tests/mutants.h $(MODE_LIB) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -DDR_MUTANT=$* -o $@ $< $(MODE_LIB) $(TEST_LIBS) $(LDLIBS_COMMON)

mutants: $(MUTANT_BIN)
	@sh scripts/run_mutants.sh $(MUTANT_BIN)

test: deps
	@$(MAKE) --no-print-directory $(CLI) $(TEST_BIN) $(MUTANT_BIN)
	@sh scripts/run_tests.sh $(TEST_BIN)
	@sh scripts/run_mutants.sh $(MUTANT_BIN)

$(BUILD)/bench/%: bench/%.c $(MODE_LIB) $(BUILD)/.flags
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(BLAS_CFLAGS) $(LDFLAGS) -o $@ $< $(MODE_LIB) $(BLAS_LIBS) $(LDLIBS_COMMON)

bench: deps
	@$(MAKE) --no-print-directory $(BENCH_BIN)
	@sh scripts/run_bench.sh $(BENCH_BIN)

CONF_SRC = $(wildcard conformance/*.c)
CONF_OBJ = $(CONF_SRC:%.c=$(BUILD)/%.o)
CONF_BIN = bin/conformance
$(CONF_BIN): $(CONF_OBJ) $(MODE_LIB) build/.mode
	@mkdir -p bin
	$(CC) $(LDFLAGS) -o $@ $(CONF_OBJ) $(MODE_LIB) $(LDLIBS_COMMON)

# The main job: every variant against ref/, planted faults, reports/out/index.html.
conformance: deps
	@$(MAKE) --no-print-directory $(CLI) $(CONF_BIN)
	@$(CONF_BIN) $(if $(FULL),--full,)

clean:
	rm -rf build lib bin

-include $(LIB_OBJ:.o=.d) $(CONF_OBJ:.o=.d) $(BUILD)/cli/main.d $(TEST_BIN:=.d)
