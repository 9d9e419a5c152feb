# The two commands of the README, and a few more.
#   make demo   build, make the demo data set once, run `fusionflow bench` on it
#   make test   build and run every test (unit, golden against torchvision);
#               the golden and Python tests run in the environment of
#               tests/requirements.txt (scripts/test-venv.sh: made once, in
#               the cache directory, then reused)
#   make bench  the side-by-side benchmark against torchvision's DataLoader
#   make test CC=clang   the same tests built with clang (in build-clang)
#   make fuzz   build the fuzz targets with clang's libFuzzer (ASan+UBSan, in
#               build-fuzz) and run each for FUZZ_SECONDS (default 60),
#               FUZZ_JOBS at a time (default: the number of cores)
#   make wheel  the self-contained wheel of the Python package (cp39-abi3,
#               manylinux; scripts/wheel.sh), in $(BUILD)/wheel/wheelhouse
#   make device-carry  the one archive tests/device/run.sh runs on a GPU machine (build-carry/carry.tar.xz)
# With ccache installed, every build compiles through it (CMake's compiler
# launcher; the wheel's build too): a fresh clone then recompiles nothing that
# an earlier build of the same sources compiled. CCACHE=none turns it off.
# CC=clang (on the command line) builds with that compiler, in build-clang
# unless BUILD says where: `make test CC=clang`.
ifeq ($(origin CC),command line)
BUILD ?= build-$(notdir $(CC))
CMAKE_CC := -DCMAKE_C_COMPILER=$(CC)
endif
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
DEMO_DIR ?= $(BUILD)/demo-data
PYTHON ?= /usr/bin/python3
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= $(JOBS)
CCACHE ?= $(shell command -v ccache 2>/dev/null)
LAUNCHER := $(filter-out none,$(CCACHE))
LAUNCHERS := -DCMAKE_C_COMPILER_LAUNCHER=$(LAUNCHER) -DCMAKE_CUDA_COMPILER_LAUNCHER=$(LAUNCHER)
ifneq ($(LAUNCHER),)
# the wheel's CMake tree (scikit-build-core) takes them from the environment
export CMAKE_C_COMPILER_LAUNCHER ?= $(LAUNCHER)
export CMAKE_CUDA_COMPILER_LAUNCHER ?= $(LAUNCHER)
# paths under the clone hash as relative ones, so that another clone's build hits the cache
export CCACHE_BASEDIR ?= $(CURDIR)
endif
DEMO_PIPELINE = decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)

.PHONY: all deps build test fuzz demo demo-data bench wheel device-carry clean

all: build

deps:
	@scripts/install-deps.sh

# The long stages say what they do and how long they took (scripts/stage.sh).
build: deps
	@scripts/stage.sh "build: configure" $(BUILD)/configure.log \
	  cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_CC) $(LAUNCHERS) $(if $(FF_PYTHON),-DFF_PYTHON=$(FF_PYTHON)) $(CMAKE_FLAGS)
	@scripts/stage.sh "build: compile in $(BUILD)" $(BUILD)/build.log cmake --build $(BUILD) -j $(JOBS)

test: deps
	@py=$$(scripts/test-venv.sh) && $(MAKE) --no-print-directory build FF_PYTHON="$$py"
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DFF_FUZZ=ON \
	  -DFF_SANITIZE=address,undefined -DFF_CUDA=OFF -DFF_BUILD_PYTHON=OFF $(LAUNCHERS) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS)

$(DEMO_DIR)/.complete:
	$(PYTHON) scripts/demo-data.py $(DEMO_DIR)

demo-data: deps $(DEMO_DIR)/.complete

demo: build demo-data
	$(BUILD)/fusionflow bench --source imagefolder:$(DEMO_DIR) --pipeline "$(DEMO_PIPELINE)" --epochs 1

bench: build demo-data
	@scripts/install-deps.sh --bench
	$(PYTHON) bench/ops_compare.py --ops-bench $(BUILD)/ops_bench --repeats 3
	$(PYTHON) bench/compare.py --data $(DEMO_DIR) --cli $(BUILD)/fusionflow --decode-only $(BUILD)/decode_only --repeats 3
	$(PYTHON) bench/policies.py --data $(DEMO_DIR) --cli $(BUILD)/fusionflow

wheel: deps
	@scripts/wheel.sh $(BUILD)/wheel

device-carry: deps
	JOBS=$(JOBS) tests/device/prepare.sh

clean:
	rm -rf $(BUILD)
