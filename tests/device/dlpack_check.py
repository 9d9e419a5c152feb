"""DLPack into torch — the step of tests/device/run.sh (METHOD.md, section 4).

Usage: dlpack_check.py DEVICE DATA [--json FILE]

DATA is an ImageFolder (run.sh writes one with make_images). One epoch at
batch 16 through ``random_resized_crop(64) | flip | normalize`` is taken
three ways: on the CPU alone (the reference), with the device DEVICE
preparing every sample it can (FF_FORCE_DEVICE_SHARE=1), and with the
batches left on DEVICE (``output_device``). Device decode is off in every
run: this is a bit-identity check of the kernels and the hand-over, and
nvJPEG's pixels differ from libjpeg-turbo's by design (the nvJPEG step
measures that difference). Each batch goes through torch.from_dlpack
(NumPy's when torch is absent); on a GPU machine the host batches also go
up with ``.cuda(non_blocking=True)``. Every batch must equal the reference
byte for byte; the last line says what ran. Exit 0 when all matched, 1 on a
mismatch or error, 77 when the check cannot run here (no data, no NumPy).
"""
import argparse
import json
import os
import sys

PIPELINE = "decode | random_resized_crop(size=64) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"


def skip(why):
    print(why)
    sys.exit(77)


def epoch(fusionflow, data, device, share, to_host, **kw):
    """The epoch's batches as host bytes, and what the batches were."""
    if share is not None:
        os.environ["FF_FORCE_DEVICE_SHARE"] = share
    try:
        loader = fusionflow.Loader(data, PIPELINE, batch_size=16, seed=5, num_threads=2, device=device, output="dlpack",
                                   device_decode="off", **kw)
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("device")
    ap.add_argument("data")
    ap.add_argument("--json", help="write the figures to this file")
    a = ap.parse_args()
    device, data, json_path = a.device, a.data, a.json
    if not os.path.isdir(data):
        skip(f"no image set at {data}")
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
    figures = {"python": sys.version.split()[0], "torch": torch.__version__ if torch else None, "cuda": gpu,
               "device_decode": "off", "runs": []}
    lines = []
    for name, kw in [("device", dict()), ("output_device", dict(output_device=device))]:
        got, kinds, stats = epoch(fusionflow, data, device, "1.0", to_host, **kw)
        equal = got == ref
        cpu_decodes = "nvjpeg" not in str(stats.get("decoders", ""))  # device_decode="off": the CPU decodes all
        figures["runs"].append({"name": name, "batches": len(got), "equal": equal and cpu_decodes,
                                "device_samples": stats.get("device_samples"), "kinds": sorted(kinds),
                                "decoders": stats.get("decoders", "n/a")})
        if not cpu_decodes:
            print(f"{name}: decoders {stats['decoders']} with device_decode off: not a like-with-like comparison")
            break
        if not equal:
            bad = next(i for i, (a, b) in enumerate(zip(got, ref)) if a != b) if len(got) == len(ref) else -1
            print(f"{name}: batches differ from the CPU's (first: batch {bad}; {len(got)} vs {len(ref)} batches)")
            break
        lines.append(f"{name}: {len(got)} batches equal the CPU's ({stats['device_samples']} samples on "
                     f"{device}; {'/'.join(sorted(kinds))}; decoders {stats.get('decoders', 'n/a')})")
    if json_path:
        with open(json_path, "w") as f:
            json.dump(figures, f)
    if not all(r["equal"] for r in figures["runs"]):
        return 1
    print(f"torch {torch.__version__ if torch else 'absent'}{' with CUDA' if gpu else ''}, device decode off: "
          + "; ".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
