#!/usr/bin/env bash
# decode.sh — the device-decode checks (whole-sample offload, placement
# `device`) on a machine with an NVIDIA GPU, in one call:
#   1. nvJPEG loads (build/nvjpeg/libnvjpeg.so.13, or FF_NVJPEG_LIBRARY) and
#      the loader's decoder on cuda:0 is nvjpeg-hardware (H100/H200/A100) or
#      nvjpeg-hybrid;
#   2. its pixels against libjpeg-turbo's (the decode Pillow and torchvision
#      use) on the demo data: mean and max absolute difference, PSNR
#      (test_offload's nvjpeg_decode_on_cuda_differs_as_documented);
#   3. device images/s at batch 256 with every sample on the device, for the
#      hardware and the hybrid backend (device time per sample from events);
#   4. bench/offload.py on cuda:0 at 1 and 2 CPU threads, split vs device
#      placement, with a consumer that outpaces the pool: images/s, stall
#      removed, CPU time per sample by placement.
# Prepare on a machine with network first (the GPU machine has none):
#   tests/device/decode.sh --prepare   # build/nvjpeg (the wheel's library), build/demo-small
# and carry build/nvjpeg and build/demo-small. Uses the build folder of
# run.sh (BUILD, default build-device), configuring it when needed.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-device}
DATA_SET=${DATA:-}
DATA=${DATA:-build/demo-small}
start=$(date +%s)
step() { echo "== decode: $* ($(($(date +%s) - start)) s)" >&2; }

if [[ "${1:-}" == "--prepare" ]]; then
  scripts/install-deps.sh --nvjpeg
  [ -d build/demo-data ] || make demo-data
  rm -rf build/demo-small && mkdir -p build/demo-small
  for class in build/demo-data/*/; do # the first 30 images of each class: ~12 MB
    name=$(basename "$class")
    mkdir -p "build/demo-small/$name"
    for f in $(ls "$class" | sort | sed -n 1,30p); do cp "$class/$f" "build/demo-small/$name/"; done
  done
  du -sh build/nvjpeg build/demo-small
  exit 0
fi

# A carry set (tests/device/prepare.sh) holds nvjpeg/ and demo-small/ itself.
for d in "$BUILD/nvjpeg" build/nvjpeg; do
  if [ -z "${FF_NVJPEG_LIBRARY:-}" ] && [ -f "$d/libnvjpeg.so.13" ]; then
    export FF_NVJPEG_LIBRARY=$(cd "$d" && pwd)/libnvjpeg.so.13
  fi
done
if [ -z "${DATA_SET:-}" ] && [ -d "$BUILD/demo-small" ]; then DATA=$BUILD/demo-small; fi
[ -d "$DATA" ] || { echo "decode.sh: no $DATA: run tests/device/decode.sh --prepare and carry it" >&2; exit 2; }
mkdir -p "$BUILD"
# Prebuilt binaries (a carry set) are used as they are; else build them here.
if [ ! -x "$BUILD/fusionflow" ] || [ ! -x "$BUILD/tests/test_offload" ] || [ ! -x "$BUILD/tests/test_nvjpeg" ]; then
  NVCC=${CUDACXX:-/usr/local/cuda/bin/nvcc}
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    step "configure ($BUILD)"
    cmake -S . -B "$BUILD" -DFF_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
          -DCMAKE_CUDA_ARCHITECTURES="${FF_CUDA_ARCH:-90}" >"$BUILD/decode-configure.log" 2>&1 ||
      { cat "$BUILD/decode-configure.log" >&2; exit 1; }
  fi
  step "build"
  cmake --build "$BUILD" -j "$(nproc)" --target fusionflow_cli test_offload test_nvjpeg nvjpeg_stub \
    >"$BUILD/decode-build.log" 2>&1 || { tail -50 "$BUILD/decode-build.log" >&2; exit 1; }
fi
BUILD=$(cd "$BUILD" && pwd)
CLI="$BUILD/fusionflow"
status=0

step "1. the decoder on cuda:0"
PIPE="decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"
"$CLI" bench --source "imagefolder:$DATA" --pipeline "$PIPE" --device cuda:0 --device-decode on --batches 2 \
  --batch-size 32 --json >"$BUILD/decode-open.json" || { echo "decode.sh: cuda:0 cannot be used here" >&2; exit 1; }
python3 - "$BUILD/decode-open.json" <<'EOF' || status=1
import json, sys
d = json.load(open(sys.argv[1]))
print("device %s, decoder %s %s" % (d["device"], d["device_decoder"], d["device_decoder_note"]))
sys.exit(0 if d["device_decoder"].startswith("nvjpeg") else 1)
EOF

step "2. nvJPEG against libjpeg-turbo on $DATA"
FF_DEMO_DATA="$(cd "$DATA" && pwd)" CMOCKA_MESSAGE_OUTPUT=stdout timeout 300 "$BUILD/tests/test_offload" \
  >"$BUILD/decode-diff.log" 2>&1 || status=1
grep -E "vs libjpeg-turbo|skipped|FAILED" "$BUILD/decode-diff.log" || true
grep -q "SKIPPED \] nvjpeg_decode_on_cuda" "$BUILD/decode-diff.log" && status=1
FF_NVJPEG_LIBRARY="$BUILD/tests/libnvjpeg_stub.so" timeout 60 "$BUILD/tests/test_nvjpeg" >/dev/null 2>&1 ||
  { echo "test_nvjpeg (stub) failed" >&2; status=1; }

step "3. device images/s at batch 256, every sample on the device"
for backend in hardware hybrid; do
  FF_NVJPEG_BACKEND=$backend FF_FORCE_DEVICE_SHARE=1 timeout 200 "$CLI" bench --source "imagefolder:$DATA" \
    --pipeline "$PIPE" --device cuda:0 --device-decode on --batch-size 256 --warmup 1 --batches 4 --threads 2 \
    --json >"$BUILD/decode-$backend.json" 2>/dev/null || { echo "$backend: bench failed" >&2; status=1; continue; }
  python3 - "$BUILD/decode-$backend.json" "$backend" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
pl = d["placements"]
dev = d["device_samples"] / d["device_s"] if d["device_s"] > 0 else 0
print("%-8s decoder %-16s %s: end to end %.0f images/s, device %.0f images/s (events, decode + ops), "
      "device-placed %d, decode fallbacks %d, CPU %.1f us per device sample (read %.1f)"
      % (sys.argv[2], d["device_decoder"], d["device_decoder_note"], d["images_per_s"], dev,
         pl["device"]["samples"], d["device_decode_fallbacks"], pl["device"]["cpu_us_per_sample"],
         pl["device"]["read_us_per_sample"]))
EOF
done

step "4. offload at 1 and 2 CPU threads: split vs device on cuda:0"
for threads in 1 2; do
  timeout 240 python3 bench/offload.py --data "$DATA" --cli "$CLI" --threads "$threads" --step-ms 10 \
    --batches 30 --repeats 1 || status=1
done
echo "decode: total $(($(date +%s) - start)) s"
exit "$status"
