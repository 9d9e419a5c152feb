# The two commands of the README, and a few more.
#   make demo   build, make the demo data set once, run `fusionflow bench` on it
#   make test   build and run every test (unit, golden against torchvision)
#   make bench  the side-by-side benchmark against torchvision's DataLoader
#   make device-carry  the prebuilt set tests/device/run.sh runs on a GPU machine (build-carry/carry)
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
DEMO_DIR ?= $(BUILD)/demo-data
PYTHON ?= /usr/bin/python3
DEMO_PIPELINE = decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)

.PHONY: all deps build test demo demo-data bench device-carry clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
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

device-carry: deps
	JOBS=$(JOBS) tests/device/prepare.sh

clean:
	rm -rf $(BUILD)
