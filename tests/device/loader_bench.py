#!/usr/bin/env python3
"""loader_bench.py — two steps of tests/device/run.sh that measure the loader
through the fusionflow CLI's `bench --json` and the Python package (METHOD.md,
sections 5 and 6):

    loader_bench.py nvjpeg DEVICE DATA --cli CLI [--batch 256] [--json FILE]
    loader_bench.py e2e DEVICE DATA --cli CLI [--batch 256] [--batches 8] [--json FILE]

nvjpeg: per nvJPEG backend (hardware, hybrid; FF_NVJPEG_BACKEND) on a CUDA
  DEVICE, or the emulator's nvJPEG imitation (DEVICE?decode=nvjpeg) on emu:
  (1) the decoder that ran, and its pixels against libjpeg-turbo's (the
  CPU decode, which Pillow and torchvision use): the first 128 images of
  DATA, `decode(dct_scale=false) | center_crop(size=224)`, every sample
  placed on the device, batches of 64 (the hybrid backend takes more than
  50): mean and max |difference|, PSNR; the bound is the
  documented one, PSNR > 30 dB (a decode of the same image; nvJPEG has no
  fancy upsampling and another IDCT, so the pixels are not libjpeg-turbo's);
  (2) images/s at batch BATCH with every sample on the device, end to end
  (reading, nvJPEG, one crop kernel, a 150 KB uint8 sample down per image:
  the decoder bounds it, so this is the decode stage's rate) and by the
  device's own time (events: the kernels, and the decode where it runs on
  the SMs — the hybrid backend's, not the hardware engines').
  This is the only step that compares nvJPEG's pixels, and the only one
  where device decode is on for a comparison.
e2e: the loader end to end through RandAugment at 224x224 (batch BATCH,
  every CPU core, every sample the device can take: FF_FORCE_DEVICE_SHARE=1)
  with host output and with output on the device, device decode on
  (placement device) and off (placement split), and the CPU alone for
  scale: images/s, the decoder that ran, device time per image. run.sh's
  report sets these beside device_check's stages alone.

Every run's line names the decoders that ran (ff_stats.decoders: the device's,
libjpeg-turbo on the CPU workers, or both joined by '+'), so a device row
cannot silently be a CPU decode. Exit 0 when the
runs completed and (nvjpeg) the bound held, 1 otherwise, 77 when nothing
could be measured here (nvjpeg: no decoder on this device).
"""
import argparse
import json
import os
import subprocess
import sys

RAND_AUGMENT = ("decode | random_resized_crop(size=224) | random_horizontal_flip | "
                "rand_augment(num_ops=2, magnitude=9) | normalize(mean=imagenet, std=imagenet)")
DECODE_ONLY = "decode(dct_scale=false) | center_crop(size=224)"
PSNR_BOUND = 30.0


def bench(cli, device, data, pipeline, batch, decode, output="cpu", share="1.0", backend=None, batches=4):
    """One `fusionflow bench --json` run: its JSON object, or {"error": ...}."""
    env = dict(os.environ)
    if share:
        env["FF_FORCE_DEVICE_SHARE"] = share
    if backend:
        env["FF_NVJPEG_BACKEND"] = backend
    cmd = [cli, "bench", "--source", "imagefolder:" + data, "--pipeline", pipeline, "--device", device,
           "--device-decode", decode, "--output-device", output, "--batch-size", str(batch), "--warmup", "1",
           "--batches", str(batches), "--threads", str(len(os.sched_getaffinity(0))), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    try:
        out = json.loads(p.stdout)
    except ValueError:
        out = {}
    if p.returncode or "error" in out:
        return {"error": out.get("error") or p.stderr.strip()[-300:] or "exit %d" % p.returncode}
    return out


def summary(run):
    """The figures of one bench run that the report keeps ("n/a" for fields this build does not have)."""
    if "error" in run:
        return {"error": run["error"]}
    dev_s, dev_n = run.get("device_s", 0), run.get("device_samples", 0)
    keep = ("images_per_s", "samples", "threads", "device", "device_samples", "device_s", "device_fallbacks",
            "device_decoder", "device_decoder_note", "device_decode_fallbacks", "decoders", "cpu_decodes",
            "device_decodes", "stall_share", "placements", "same_region_decode")
    out = {k: run.get(k, "n/a") for k in keep}
    out["device_images_per_s"] = round(dev_n / dev_s, 1) if dev_s and dev_n else 0.0
    for k in run:  # fields a newer build adds about the decoder (backends, fallbacks): kept as they are
        if k.startswith("device_decode") or k.startswith("decoder"):
            out.setdefault(k, run[k])
    return out


def pixels(device, data, backend, count=128):
    """(decoder, fallbacks, samples, mean, max, psnr) of the device decode against the CPU's."""
    import numpy as np
    import fusionflow

    if backend:
        os.environ["FF_NVJPEG_BACKEND"] = backend

    def epoch(dev, decode):
        os.environ["FF_FORCE_DEVICE_SHARE"] = "1.0"
        try:
            loader = fusionflow.Loader(data, DECODE_ONLY, batch_size=64, shuffle=False, seed=1, num_threads=2, device=dev,
                                       device_decode=decode, output="numpy")
        finally:
            os.environ.pop("FF_FORCE_DEVICE_SHARE", None)
        arrays = []
        with loader:
            for images, _ in loader:
                arrays.append(np.array(images, copy=True))
                if sum(len(a) for a in arrays) >= count:
                    break
            stats = loader.stats()
        return np.concatenate(arrays)[:count], stats

    ref, _ = epoch("cpu", "off")
    got, stats = epoch(device, "on")
    os.environ.pop("FF_NVJPEG_BACKEND", None)
    diff = np.abs(got.astype(np.int16) - ref.astype(np.int16))
    mse = float(np.mean(diff.astype(np.float64) ** 2))
    psnr = 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)
    return (stats.get("decoders", stats.get("device_decoder", "n/a")), stats.get("device_decode_fallbacks", 0),
            int(stats.get("device_decodes", stats.get("device_samples", 0))), float(diff.mean()), int(diff.max()),
            float(psnr))


def nvjpeg(a):
    try:
        import numpy  # noqa: F401 (the pixel comparison's)
    except ImportError:
        print("no NumPy in this Python (%s): the pixels cannot be compared" % sys.executable)
        return 77
    try:
        import fusionflow  # noqa: F401
    except ImportError as e:
        print("the fusionflow package does not load with this Python (%s): %s" % (sys.version.split()[0], e))
        return 1
    cuda = a.device.startswith("cuda")
    backends = ["hardware", "hybrid"] if cuda else [None]
    device = a.device if cuda else a.device.split("?")[0] + "?decode=nvjpeg"
    result, ok, ran = {"device": device, "psnr_bound_db": PSNR_BOUND, "batch": a.batch, "backends": []}, True, 0
    for backend in backends:
        name = backend or "emulated"
        row = {"backend": name}
        try:
            decoder, fallbacks, samples, mean, mx, psnr = pixels(device, a.data, backend)
        except Exception as e:  # the package or the device cannot run this here
            row["error"] = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            print("%-9s pixels: %s" % (name, row["error"]))
            ok = False
            result["backends"].append(row)
            continue
        row.update(decoder=decoder, device_samples=samples, decode_fallbacks=fallbacks, mean_abs_diff=round(mean, 4),
                   max_abs_diff=mx, psnr_db=round(psnr, 2))
        if not any(d.startswith("nvjpeg") for d in str(decoder).split("+")) or not samples:
            print("%-9s decoder %s: nothing decoded on %s" % (name, decoder, device))
            result["backends"].append(row)
            continue
        ran += 1
        within = psnr > PSNR_BOUND
        ok &= within
        row["within_bound"] = within
        run = summary(bench(a.cli, device, a.data, DECODE_ONLY, a.batch, "on", backend=backend))
        row["throughput"] = run
        if "error" in run:
            ok = False
            print("%-9s bench: %s" % (name, run["error"]))
        print("%-9s decoders %-15s vs libjpeg-turbo on %d device decodes: mean |diff| %.3f, max %d, PSNR %.1f dB "
              "(bound > %.0f: %s); batch %d: %s images/s end to end (decoders %s), %s by device time, "
              "%s CPU fallbacks" % (name, decoder, samples, mean, mx, psnr, PSNR_BOUND, "held" if within else "MISSED",
                                    a.batch, run.get("images_per_s", "n/a"), run.get("decoders", "n/a"),
                                    run.get("device_images_per_s", "n/a"), run.get("device_decode_fallbacks", "n/a")))
        result["backends"].append(row)
    _write(a.json, result)
    if not ran:
        print("no device decoder on %s (nvJPEG did not load or decoded nothing): nothing to measure" % device)
        return 77 if ok else 1
    print("nvjpeg: %s; %s" % ("; ".join(
        "%s %s images/s, PSNR %.1f dB" % (r["backend"], r.get("throughput", {}).get("images_per_s", "n/a"),
                                          r["psnr_db"]) for r in result["backends"] if "psnr_db" in r),
        "bound > %.0f dB held" % PSNR_BOUND if ok else "FAILED"))
    return 0 if ok else 1


def e2e(a):
    runs = [("cpu", "cpu", "off", "cpu", None), ("device, host output", a.device, "on", "cpu", "1.0"),
            ("device, device output", a.device, "on", a.device, "1.0"),
            ("split, host output", a.device, "off", "cpu", "1.0"),
            ("split, device output", a.device, "off", a.device, "1.0")]
    result, ok = {"pipeline": RAND_AUGMENT, "batch": a.batch, "runs": []}, True
    for name, device, decode, output, share in runs:
        run = summary(bench(a.cli, device, a.data, RAND_AUGMENT, a.batch, decode, output=output, share=share,
                            batches=a.batches))
        run.update(name=name, device_decode=decode, output_device=output)
        result["runs"].append(run)
        if "error" in run:
            ok = False
            print("%-22s %s" % (name, run["error"]))
            continue
        print("%-22s %9.1f images/s end to end, %5.1f%% of samples on the device (%s images/s device time), "
              "decoders %s" % (name, run["images_per_s"], 100.0 * run["device_samples"] / max(run["samples"], 1),
                               run["device_images_per_s"], run["decoders"]))
    _write(a.json, result)
    print("e2e, images/s: %s%s" % ("; ".join("%s %s" % (r["name"], r.get("images_per_s", "n/a"))
                                             for r in result["runs"]), "" if ok else "; FAILED"))
    return 0 if ok else 1


def _write(path, obj):
    if path:
        with open(path, "w") as f:
            json.dump(obj, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["nvjpeg", "e2e"])
    ap.add_argument("device")
    ap.add_argument("data")
    ap.add_argument("--cli", required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=8, help="e2e: timed batches per run (after one untimed)")
    ap.add_argument("--json")
    a = ap.parse_args()
    return nvjpeg(a) if a.mode == "nvjpeg" else e2e(a)


if __name__ == "__main__":
    sys.exit(main())
