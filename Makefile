# The two commands of the README, and a few more.
#   make demo   build, make the demo data set once, run `fusionflow bench` on it
#   make test   build and run every test (unit, golden against torchvision);
#               the golden and Python tests run in the environment of
#               tests/requirements.txt (scripts/test-venv.sh: made once, in
#               the cache directory, then reused)
#   make bench  the side-by-side benchmark against torchvision's DataLoader
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
DEMO_DIR ?= $(BUILD)/demo-data
PYTHON ?= /usr/bin/python3
DEMO_PIPELINE = decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)

.PHONY: all deps build test demo demo-data bench clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(if $(FF_PYTHON),-DFF_PYTHON=$(FF_PYTHON)) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: deps
	@py=$$(scripts/test-venv.sh) && $(MAKE) --no-print-directory build FF_PYTHON="$$py"
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

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

clean:
	rm -rf $(BUILD)
