"""DLPack into torch — the step of tests/device/run.sh (METHOD.md, section 4).

Usage: dlpack_check.py DEVICE DATA

DATA is an ImageFolder (prepare.sh carries one; when it is missing and Pillow
is here, 48 JPEGs are written there first). One epoch at batch 16 through
``random_resized_crop(64) | flip | normalize`` is taken three ways: on the CPU
alone (the reference), with the device DEVICE preparing every sample it can
(FF_FORCE_DEVICE_SHARE=1), and — when the package has ``output_device`` —
with the batches left on DEVICE. Each batch goes through torch.from_dlpack
(NumPy's when torch is absent); on a GPU machine the host batches also go
up with ``.cuda(non_blocking=True)``. Every batch must equal the reference
byte for byte; the last line says what ran. Exit 0 when all matched, 1 on a
mismatch or error, 77 when the check cannot run here (no data, no NumPy).
"""
import os
import sys

PIPELINE = "decode | random_resized_crop(size=64) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"


def skip(why):
    print(why)
    sys.exit(77)


def ensure_data(data):
    if os.path.isdir(data) and any(os.scandir(data)):
        return
    try:
        import numpy as np
        from PIL import Image
    except ImportError:
        skip(f"no image set at {data} and no Pillow to write one")
    rng = np.random.default_rng(7)
    for c in range(3):
        os.makedirs(os.path.join(data, f"class{c}"), exist_ok=True)
        for i in range(16):
            h, w = int(rng.integers(80, 200)), int(rng.integers(80, 200))
            y, x = np.mgrid[0:h, 0:w]
            px = np.stack([x * 255 // w, y * 255 // h, (x + y) % 256], -1) + rng.integers(0, 30, (h, w, 3))
            Image.fromarray(np.clip(px, 0, 255).astype(np.uint8)).save(
                os.path.join(data, f"class{c}", f"{i}.jpg"), quality=90)


def epoch(fusionflow, data, device, share, to_host, **kw):
    """The epoch's batches as host bytes, and what the batches were."""
    if share is not None:
        os.environ["FF_FORCE_DEVICE_SHARE"] = share
    try:
        loader = fusionflow.Loader(data, PIPELINE, 16, seed=5, num_threads=2, device=device, output="dlpack",
                                   **kw)
    finally:
        os.environ.pop("FF_FORCE_DEVICE_SHARE", None)
    out, kinds = [], set()
    with loader:
        for images, labels in loader:
            arr = to_host(images, kinds)
            out.append((arr.tobytes(), to_host(labels, kinds).tobytes()))
        stats = loader.stats()
    return out, kinds, stats


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    device, data = sys.argv[1], sys.argv[2]
    ensure_data(data)
    try:
        import numpy as np
    except ImportError:
        skip("no NumPy")
    try:
        import fusionflow
    except ImportError as e:
        print(f"the fusionflow package does not load with this Python ({sys.version.split()[0]}): {e}")
        return 1
    try:
        import torch
    except ImportError:
        torch = None
    gpu = torch is not None and device.startswith("cuda") and torch.cuda.is_available()

    def to_host(t, kinds):
        dev = t.__dlpack_device__()
        kinds.add({1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost"}.get(dev[0], str(dev[0])))
        if torch is None:
            return np.from_dlpack(t)
        x = torch.from_dlpack(t)
        if gpu and x.device.type == "cpu":
            kinds.add("pinned" if x.is_pinned() else "pageable")
            x = x.cuda(non_blocking=True)
        if x.device.type == "cuda":
            torch.cuda.current_stream().synchronize()
        return x.cpu().numpy()

    ref, _, _ = epoch(fusionflow, data, "cpu", None, to_host)
    runs = [("device", dict())]
    if "output_device" in fusionflow.Loader.__init__.__code__.co_varnames:
        runs.append(("output_device", dict(output_device=device)))
    lines = []
    for name, kw in runs:
        got, kinds, stats = epoch(fusionflow, data, device, "1.0", to_host, **kw)
        if got != ref:
            bad = next(i for i, (a, b) in enumerate(zip(got, ref)) if a != b) if len(got) == len(ref) else -1
            print(f"{name}: batches differ from the CPU's (first: batch {bad}; {len(got)} vs {len(ref)} batches)")
            return 1
        lines.append(f"{name}: {len(got)} batches equal the CPU's ({stats['device_samples']} samples on "
                     f"{device}; {'/'.join(sorted(kinds))})")
    if runs[-1][0] != "output_device":
        lines.append("output_device: not in this build")
    print(f"torch {torch.__version__ if torch else 'absent'}{' with CUDA' if gpu else ''}: " + "; ".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
