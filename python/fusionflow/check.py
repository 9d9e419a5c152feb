"""Check fusionflow's pixels against torchvision's (or timm's) on your own images.

    python -m fusionflow.check --source /data/val --pipeline "decode | resize(size=256) | center_crop(size=224)"
    fusionflow check --source /data/val --pipeline "..." --against timm      (the CLI runs this module)

For a random sample of the source's images (--samples, default 64), each is
run through fusionflow and through the reference with the same random draws:
fusionflow's plan of the sample (Loader.plan: crop box, flips, augmentation
ops and magnitudes) is replayed with the reference library's own functional
ops on the image as Pillow decodes it. Reported: the largest difference
after each op (the pipeline cut after that op, run by fusionflow.augment_image
and replayed; in levels of 0..255) and, on the last row, of the loader's own
output (a Loader over the source, seeked to the sample; float units after
normalize), per image too, and a one-line verdict. A final mixup_cutmix (a
batch stage) is left out.

Exit status: 0 every pixel equal, 1 some differ, 2 usage (an option, the
pipeline text), 3 the check could not run (the reference missing in this
Python, an unreadable source, a step the reference cannot replay). Errors
are one line on stderr.
"""
import argparse
import io
import json
import os
import random
import re
import sys
import tarfile

from . import _fusionflow as _c
from ._errors import PipelineError

EXIT_SAME, EXIT_DIFFERENT, EXIT_USAGE, EXIT_CANNOT = 0, 1, 2, 3
_PROG = "fusionflow check"
_IMAGENET = {"mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
_FLOAT_OPS = ("normalize", "to_dtype", "random_erasing")


class _Stop(Exception):
    """Ends the check with a one-line message and an exit status."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _Stop(EXIT_USAGE, f"{message}; see '{_PROG} --help'")


def _arguments(argv):
    p = _Parser(prog=_PROG, description="fusionflow's pixels against torchvision's or timm's on your images.")
    p.add_argument("--against", choices=("torchvision", "timm"), default="torchvision")
    p.add_argument("--source", required=True, help="imagefolder:DIR, list:FILE, tar:PATTERN (local), a folder")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--pipeline", help="the pipeline text")
    what.add_argument("--recipe", help="a recipe preset's pipeline")
    p.add_argument("--samples", type=int, default=64, help="images to check (default 64)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--semantics", choices=("v1", "v2"), default="v1")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    a = p.parse_args(argv)
    for name, low in (("samples", 1), ("seed", 0), ("epoch", 0)):
        if getattr(a, name) < low:
            p.error(f"--{name} must be at least {low}")
    if a.against == "timm" and a.semantics == "v2":
        p.error("--against timm replays timm's path (Pillow, then ToTensor): --semantics v2 does not apply")
    return a


def _require(against):
    """The reference's packages, or the one-line error naming the pip command."""
    wanted = [("numpy", "numpy"), ("PIL", "pillow"), ("torch", "torch"), ("torchvision", "torchvision")]
    if against == "timm":
        wanted.append(("timm", "timm"))
    for module, package in wanted:
        try:
            __import__(module)
        except ImportError as e:
            names = " ".join(p for _, p in wanted[2:]) if module in ("torch", "torchvision", "timm") else package
            raise _Stop(EXIT_CANNOT, f"--against {against} needs {package} in {sys.executable} ({e}): "
                                     f"pip install {names}, or name another Python with --python or FF_PYTHON")


def _split_ops(text):
    """The pipeline's top-level ops, as written (groups and quotes kept whole)."""
    ops, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "|" and depth == 0:
            if text[i + 1:i + 2] == "|" or text[i - 1:i] == "|":
                raise _Stop(EXIT_CANNOT, "views (decode || N x OPS) are not checked: check each view's ops as a "
                                         "pipeline of its own (decode | OPS)")
            ops.append(text[start:i].strip())
            start = i + 1
    ops.append(text[start:].strip())
    return ops


def _name(op):
    return op.split("(", 1)[0].strip().lower()


def _rgb(op, key):
    """normalize's mean or std as written: imagenet, a number or (r, g, b)."""
    m = re.search(key + r"\s*=\s*(imagenet|[(\[][^)\]]*[)\]]|[-+0-9.eE]+)", op, re.I)
    if not m:
        raise _Stop(EXIT_USAGE, f"pipeline: {op} needs the argument '{key}'")
    v = m.group(1)
    if v.lower() == "imagenet":
        return _IMAGENET[key]
    nums = [float(x) for x in v.strip("()[]").split(",") if x.strip()]
    return tuple(nums * 3 if len(nums) == 1 else nums)


class _Sample:
    """One image's bytes and a path fusionflow can open (a local shard's member is
    written to a scratch file)."""

    def __init__(self, path, scratch, shards):
        self.path = path
        if os.path.isfile(path):
            with open(path, "rb") as f:
                self.data = f.read()
            self.file = path
            return
        shard, sep, member = path.rpartition(":")
        if not sep or not os.path.isfile(shard):
            raise _Stop(EXIT_CANNOT, f"{path}: check reads local files and local tar shards only")
        if shard not in shards:
            shards[shard] = tarfile.open(shard)
        self.data = shards[shard].extractfile(member).read()
        self.file = os.path.join(scratch, "sample" + os.path.splitext(member)[1])
        with open(self.file, "wb") as f:
            f.write(self.data)


def _levels(a, b):
    """The largest difference of two uint8 images in levels; 255 when their sizes differ."""
    import numpy as np
    if a.shape != b.shape:
        return 255
    return int(np.abs(a.astype(np.int16) - b.astype(np.int16)).max(initial=0))


class _Comparison:
    """The rows (one per op before the float stage, then the loader's output) and
    the images, filled one sample at a time."""

    def __init__(self, ops, first_float, stage, mode, seed, epoch, semantics):
        from ._replay import Replay
        self.prefixes = [" | ".join(ops[:k + 1]) for k in range(first_float)]
        self.rows = [{"op": op, "max_diff": 0, "units": "levels", "images_differing": 0} for op in ops[:first_float]]
        tail = ops[first_float:]
        self.rows.append({"op": "loader output" + (f" ({', '.join(tail)})" if tail else ""), "max_diff": 0,
                          "units": "float" if stage else "levels", "images_differing": 0})
        self.stage, self.replay, self.images, self.shards = stage, Replay(mode), [], {}
        self.seed, self.epoch, self.semantics = seed, epoch, semantics

    def sample(self, loader, i, scratch):
        import numpy as np
        from PIL import Image

        from ._image import augment_image
        plan = loader.plan(i, self.epoch)
        sample = _Sample(plan["path"], scratch, self.shards)
        with Image.open(io.BytesIO(sample.data)) as im:
            decoded = im.convert("RGB")
        record = {"index": i, "path": plan["path"], "max_levels": 0, "output_diff": 0, "first_op": None,
                  "dct_scale": plan["decode"]["dct_scale"]}
        # each op: the pipeline cut after it, through fusionflow and replayed from that cut's own plan
        for k, prefix in enumerate(self.prefixes):
            ours = np.asarray(augment_image(sample.file, prefix, self.seed, self.epoch, i, "numpy", self.semantics))
            cut = json.loads(_c.image_plan(sample.file, prefix, self.seed, self.epoch, i, int(self.semantics == "v2")))
            d = _levels(ours, self.replay.to_hwc(self.replay.run(decoded, cut)[0]))
            _tally(self.rows[k], record, d)
            record["max_levels"] = max(record["max_levels"], d)
        # the loader's own output for sample i: a batch of one, seeked to
        loader.load_state_dict({"epoch": self.epoch, "batch": i})
        images, _ = next(iter(loader))
        if list(loader.last_batch.sample_indices) != [i]:
            raise RuntimeError(f"the loader handed out samples {loader.last_batch.sample_indices}, not [{i}]")
        ours = np.array(images[0])
        final, erases = self.replay.run(decoded, plan)
        if self.stage:
            theirs, mask = self.replay.to_float(final, self.stage, erases)
            d = float(np.abs(ours - theirs)[:, mask].max(initial=0)) if ours.shape == theirs.shape else 255.0
        else:
            d = _levels(ours, self.replay.to_hwc(final))
            record["max_levels"] = max(record["max_levels"], d)
        record["output_diff"] = d
        _tally(self.rows[-1], record, d)
        self.images.append(record)

    def close(self):
        for f in self.shards.values():
            f.close()


def _open(source, text, seed, semantics):
    from ._loader import Loader
    try:
        return Loader(source, text, batch_size=1, shuffle=False, seed=seed, num_threads=1, prefetch=1, device="cpu",
                      output="numpy", semantics=semantics)
    except PipelineError as e:
        raise _Stop(EXIT_USAGE, str(e)) from None
    except (OSError, ValueError) as e:
        raise _Stop(EXIT_CANNOT, str(e)) from None


def _pipeline_text(pipeline, recipe):
    from ._recipes import recipe_pipeline
    try:
        return recipe_pipeline(recipe)[0] if recipe else pipeline
    except PipelineError as e:  # a recipe whose ops this build lacks
        raise _Stop(EXIT_CANNOT, str(e)) from None
    except ValueError as e:  # an unknown recipe
        raise _Stop(EXIT_USAGE, str(e)) from None


def run(source, pipeline=None, recipe=None, against="torchvision", samples=64, seed=0, epoch=0, semantics="v1",
        progress=None):
    """The check as a dict (what --json prints): "ops" (a row per op before the
    float stage, then the loader's output: "op", "max_diff", "units" ("levels"
    or "float"), "images_differing"), "images" (per image: "index", "path",
    "max_levels", "output_diff", "first_op" (the first row that differs, or
    None), "dct_scale"), "left_out", "identical", "verdict". A size that
    differs counts as 255. Raises _Stop (status and one line) for what ends
    the check early."""
    _require(against)
    import tempfile

    from ._errors import Error
    from ._replay import NoReplay

    text = _pipeline_text(pipeline, recipe)
    ops, left_out = _split_ops(text), []
    if _name(ops[-1]) == "mixup_cutmix":
        left_out.append("mixup_cutmix (a batch stage: the golden tests check it against timm's Mixup)")
        ops = ops[:-1]
    first_float = next((k for k, op in enumerate(ops) if _name(op) in _FLOAT_OPS), len(ops))
    stage = None
    for op in ops[first_float:]:
        if _name(op) == "normalize":
            stage = ("normalize", _rgb(op, "mean"), _rgb(op, "std"))
        elif _name(op) == "to_dtype" and stage is None:
            stage = ("to_dtype",)
    checked = " | ".join(ops)
    loader = _open(source, checked, seed, semantics)
    size = loader.dataset_size
    indices = sorted(random.Random(seed).sample(range(size), min(samples, size)))
    c = _Comparison(ops, first_float, stage, "timm" if against == "timm" else semantics, seed, epoch, semantics)
    with tempfile.TemporaryDirectory(prefix="fusionflow-check-") as scratch, loader:
        try:
            for n, i in enumerate(indices):
                if progress:
                    progress(n, len(indices))
                c.sample(loader, i, scratch)
        except NoReplay as e:
            raise _Stop(EXIT_CANNOT, str(e)) from None
        except (Error, OSError) as e:  # an unreadable or undecodable image: the message names it
            raise _Stop(EXIT_CANNOT, f"sample {i}: {e}") from None
        finally:
            c.close()
    result = {"against": against, "reference": _reference(against, semantics), "semantics": semantics,
              "source": str(source), "pipeline": text, "checked_pipeline": checked, "seed": seed, "epoch": epoch,
              "dataset_size": size, "samples": len(indices), "ops": c.rows, "images": c.images,
              "left_out": left_out}
    result["identical"] = all(r["max_diff"] == 0 for r in c.rows)
    result["verdict"] = _verdict(result)
    return result


def _reference(against, semantics):
    if against == "timm":
        return f"timm {_version('timm')}"
    return f"torchvision {_version('torchvision')} (transforms {semantics})"


def _version(module):
    return getattr(__import__(module), "__version__", "?")


def _tally(row, record, d):
    if d:
        row["images_differing"] += 1
        row["max_diff"] = max(row["max_diff"], d)
        if record["first_op"] is None:
            record["first_op"] = row["op"]


def _why(r, first, differ):
    """What the documentation says of the first op that differs, when it says something."""
    if any(im["dct_scale"] != 1 for im in differ) and r["against"] == "torchvision":
        return "the decode used DCT scaling (dct_scale=true): decode(dct_scale=false) gives torchvision's pixels"
    name, row = _name(first), next(row for row in r["ops"] if row["op"] == first)
    if name in ("resize", "random_resized_crop"):
        if r["against"] == "timm":
            return "timm resamples with Pillow, fusionflow's resize follows torchvision's tensors"
        if row["max_diff"] <= 1 and "antialias=false" in first:
            return ("without antialias torch sums the taps in another order by its thread count and the output "
                    "size: fusionflow's resize can be a level off there")
    if name == "gaussian_blur":
        return "fusionflow's tensor Gaussian blur may differ by a level at rounding ties"
    return ""


def _verdict(r):
    ref = r["against"]
    if r["identical"]:
        return (f"IDENTICAL: all {r['samples']} images equal {ref}'s output pixel for pixel, after every op "
                f"(seed {r['seed']}, epoch {r['epoch']})")
    differ = [im for im in r["images"] if im["first_op"] is not None]
    first = next(row["op"] for row in r["ops"] if row["max_diff"])
    levels = max((row["max_diff"] for row in r["ops"] if row["units"] == "levels"), default=0)
    out = r["ops"][-1]
    size = (f"by up to {levels} level{'s' if levels != 1 else ''}" if levels
            else f"by up to {out['max_diff']:.3g} in the float output")
    text = f"DIFFERENT: {len(differ)} of {r['samples']} images differ from {ref}'s output, {size}, first at {first}"
    why = _why(r, first, differ)
    return text + (f"; {why}" if why else "")


def _short(op, most=60):
    return op if len(op) <= most else op[:most - 3] + "..."


def _report(r, out):
    w = max([len(_short(row["op"])) for row in r["ops"]] + [20])
    print(f"{_PROG}: {r['samples']} of {r['dataset_size']} images of {r['source']}, seed {r['seed']}, "
          f"epoch {r['epoch']}, against {r['reference']}", file=out)
    for note in r["left_out"]:
        print(f"left out: {note}", file=out)
    print(f"{'op':<{w}}  {'largest difference':<20} images that differ", file=out)
    for row in r["ops"]:
        d = row["max_diff"]
        shown = (f"{d:.6g}" if row["units"] == "float" else str(d)) + f" {row['units']}"
        print(f"{_short(row['op']):<{w}}  {shown:<20} {row['images_differing']} of {r['samples']}", file=out)
    differ = sorted((im for im in r["images"] if im["first_op"]), key=lambda im: (-im["max_levels"], -im["output_diff"]))
    if differ:
        print("images that differ most (largest difference in levels, loader output's, where it starts):", file=out)
        for im in differ[:10]:
            print(f"  {im['max_levels']:>3}  {im['output_diff']:<10.4g} {im['path']} (sample {im['index']}; from "
                  f"{_short(im['first_op'], 40)}{'; DCT scale ' + str(im['dct_scale']) if im['dct_scale'] != 1 else ''})",
                  file=out)
        if len(differ) > 10:
            print(f"  ... and {len(differ) - 10} more (--json lists every image)", file=out)
    print(f"verdict: {r['verdict']}", file=out)


def main(argv=None):
    """The command line (see the module's doc); returns the exit status."""
    try:
        a = _arguments(sys.argv[1:] if argv is None else argv)
        tty = sys.stderr.isatty() and not a.json

        def progress(n, total):
            print(f"\r{_PROG}: {n}/{total} images", end="", file=sys.stderr, flush=True)

        r = run(a.source, a.pipeline, a.recipe, a.against, a.samples, a.seed, a.epoch, a.semantics,
                progress if tty else None)
        if tty:
            print("\r", end="", file=sys.stderr)
    except _Stop as e:
        print(f"{_PROG}: {e}", file=sys.stderr)
        return e.status
    cli = os.environ.get("FF_CLI_VERSION")
    if cli and cli != _c.version():
        print(f"{_PROG}: note: {sys.executable}'s fusionflow package runs library {_c.version()}, the CLI is {cli}",
              file=sys.stderr)
    if a.json:
        print(json.dumps(r))
    else:
        _report(r, sys.stdout)
    return EXIT_SAME if r["identical"] else EXIT_DIFFERENT


if __name__ == "__main__":
    sys.exit(main())
