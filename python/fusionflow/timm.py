"""A drop-in for timm's ``timm.data.create_loader``: the same arguments, mapped to a
fusionflow pipeline, sampler and batch stage, returning a :class:`fusionflow.Loader`.

    from fusionflow.timm import create_loader
    loader = create_loader("/data/imagenet/train", input_size=224, batch_size=128,
                           is_training=True, num_workers=8, distributed=True,
                           num_aug_repeats=3, collate_fn=Mixup(mixup_alpha=0.8, cutmix_alpha=1.0))

What maps to what (timm 1.0's transforms_imagenet_train / transforms_imagenet_eval):
  training   random_resized_crop(size, scale, ratio, interpolation) | random_horizontal_flip(p=hflip)
             | random_vertical_flip(p=vflip)
             | timm_rand_augment / timm_auto_augment / timm_aug_mix (auto_augment "rand-...",
               "augmix-...", other policy names, with timm's hparams: img_mean from mean,
               translate_const = int(0.45 * min size), interpolation unless "random", AugMix's
               translate_pct 0.3; colour jitter then off, as in timm), or for "3a" (timm's
               3-Augment policy: one of Solarize(128), Desaturate to gray, GaussianBlurRand with
               the radius uniform in (0.1, 2), on the PIL image)
               three_augment(color_jitter=0, semantics=pil) (colour jitter stays on, as in timm)
             | color_jitter(b, c, s[, h], semantics=pil) (inside random_apply(p=color_jitter_prob)
               when given)
             | random_grayscale(p=grayscale_prob, semantics=pil)
             | random_apply(p=gaussian_blur_prob, [gaussian_blur(kernel_size=23, sigma=(0.1, 2.0))])
             | normalize(mean, std) | random_erasing(p=re_prob, mode=re_mode, max_count=re_count)
  evaluation resize(floor(size / crop_pct), interpolation) | center_crop(size) | normalize(mean, std)
  interpolation: bilinear or bicubic (torchvision's antialiased tensor resampling, where timm uses
  Pillow's), or random in training (timm's per-sample choice of the two);
  num_workers -> num_threads; is_training -> shuffle and drop_last, as timm's DataLoader;
  distributed -> rank and world size from the environment (torchrun's RANK / WORLD_SIZE);
  num_aug_repeats -> repeated_augmentations (RepeatAugSampler, distributed training only, as timm);
  collate_fn = a timm Mixup / FastCollateMixup -> the mixup_cutmix batch stage with its settings
  (batches then carry soft targets, as Mixup returns them); use_prefetcher with a CUDA device ->
  output_device (batches handed out on that GPU).
How close the pixels come to timm's: the policies, colour jitter, grayscale and 3-Augment are
Pillow's arithmetic (semantics=pil), bit-exact with what timm applies to its PIL image (its
torchvision ColorJitter and RandomGrayscale on a PIL image call Pillow); the crop's resampling
is torchvision's tensor op, where timm's is Pillow's (up to 4 levels in a pixel); the Gaussian
blur of gaussian_blur_prob is the tensor blur, because timm's torchvision GaussianBlur converts
the PIL image to a tensor and blurs that (within a level); random erasing follows timm's
RandomErasing with noise from the sample's own stream (tests/python/test_timm_loader.py).
Refused with a ValueError that says which and why, nothing silently dropped: "3a" with magnitude
noise (mstd), an unknown auto_augment or re_mode, random interpolation at evaluation, and timm
features with no counterpart here (tf_preprocessing, aug splits, batch-size schedules, ...).
"""
import math
import os

from ._loader import Loader

IMAGENET_DEFAULT_MEAN = (0.485, 0.456, 0.406)
IMAGENET_DEFAULT_STD = (0.229, 0.224, 0.225)
DEFAULT_CROP_PCT = 0.875

# timm arguments without a counterpart, with the value that means "not used".
_NOT_SUPPORTED = {
    "no_aug": (False, "a training pipeline without augmentation: use is_training=False or fusionflow.Loader"),
    "re_split": (False, "random erasing per augmentation split (AugMix splits) is not supported"),
    "train_crop_mode": (None, "only RandomResizedCrop (train_crop_mode=None) is supported"),
    "num_aug_splits": (0, "augmentation splits (AugMix JSD) are not supported"),
    "crop_border_pixels": (None, "TrimBorder is not supported"),
    "fp16": (False, "batches are float32 (convert on the device: images.half())"),
    "tf_preprocessing": (False, "TensorFlow preprocessing is not supported"),
    "input_size_choices": (None, "variable input sizes are not supported"),
    "batch_size_choices": (None, "variable batch sizes are not supported"),
    "batch_choice_weights": (None, "variable batch sizes are not supported"),
    "batch_schedule_epochs": (None, "batch-size schedules are not supported"),
    "num_batches": (None, "a fixed batch count is not supported: an epoch is the sampler's"),
}
# timm arguments that change nothing here: the loader's threads and epochs are its own.
_NO_EFFECT = ("use_multi_epochs_loader", "persistent_workers", "worker_seeding", "batch_choice_seed",
              "batch_choice_schedule", "batch_schedule_spread", "batch_schedule_random_mix")


def _size(input_size):
    if isinstance(input_size, int):
        return input_size, input_size
    size = tuple(input_size)
    if len(size) == 3:
        if size[0] != 3:
            raise ValueError(f"fusionflow.timm: input_size {input_size!r}: 3 channels (RGB) only")
        size = size[1:]
    if len(size) != 2:
        raise ValueError(f"fusionflow.timm: input_size must be N, (H, W) or (3, H, W) (got {input_size!r})")
    return int(size[0]), int(size[1])


def _rgb(name, v):
    v = tuple(float(x) for x in v)
    if len(v) != 3:
        raise ValueError(f"fusionflow.timm: {name} must have 3 values (got {v!r})")
    return "(" + ", ".join(repr(x) for x in v) + ")"


class _ReaderSamples:
    """A timm reader's samples as (encoded bytes, label), read through the reader (the
    members of an image tar), in the order and with the labels timm gives them."""

    def __init__(self, reader):
        self.reader = reader

    def __len__(self):
        return len(self.reader)

    def __getitem__(self, i):
        f, label = self.reader[i][:2]
        with f:
            return f.read(), label


class _SampleFiles:
    """A dataset's ``samples`` list, (path, label) in its order, as (encoded bytes, label)."""

    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i][:2]
        with open(path, "rb") as f:
            return f.read(), int(label)


def _wds_source(reader):
    """timm's WebDataset reader (create_dataset("wds/...")) as a tar: source of its split's shards."""
    if getattr(reader, "remap_class", False) or getattr(reader, "target_key", None) not in (None, "cls"):
        raise ValueError("fusionflow.timm: a wds dataset with a class_map or a target_key other than 'cls' is "
                         "not supported (labels are read from KEY.cls)")
    shards = [os.path.join(reader.root, f) for f in reader.split_info.filenames]
    return "tar:" + "::".join(shards)


def _source(dataset):
    """(source for the Loader, samples to check it against or None) of what timm's
    create_dataset (or torchvision's ImageFolder) returned, or of a path."""
    if isinstance(dataset, (str, bytes, os.PathLike)):
        return os.fspath(dataset), None
    reader = getattr(dataset, "reader", None)
    if reader is not None and hasattr(reader, "split_info"):  # ReaderWds: shards with KEY.cls
        return _wds_source(reader), None
    if reader is not None and hasattr(reader, "__getitem__") and hasattr(reader, "__len__"):
        root, samples = getattr(reader, "root", None), getattr(reader, "samples", None)
        if isinstance(root, (str, os.PathLike)) and os.path.isdir(root) and samples is not None:
            return os.fspath(root), samples  # a folder: served by the library when timm's order is ours
        return _ReaderSamples(reader), None  # an image tar, or another map-style reader
    root, samples = getattr(dataset, "root", None), getattr(dataset, "samples", None)
    if isinstance(root, (str, os.PathLike)) and os.path.isdir(root) and samples is not None:
        return os.fspath(root), samples  # torchvision's ImageFolder
    raise TypeError("fusionflow.timm: dataset_or_source must be a folder or list file, a dataset of "
                    "timm.data.create_dataset (a folder, an image tar or wds/ shards) or torchvision's "
                    f"ImageFolder; got {type(dataset).__name__}")


def _same_samples(view, samples):
    """Whether the library's folder index lists timm's samples, in timm's order."""
    ours = view.samples
    return len(ours) == len(samples) and all(
        label == int(theirs[1]) and os.path.normpath(path) == os.path.normpath(theirs[0])
        for (path, label), theirs in zip(ours, samples))


def mixup_stage(mixup):
    """The mixup_cutmix batch stage text equal to a timm Mixup / FastCollateMixup object."""
    mode = mixup.mode
    if mode not in ("batch", "pair", "elem"):
        raise ValueError(f"fusionflow.timm: Mixup mode {mode!r} is not supported (batch, pair or elem)")
    if getattr(mixup, "multi_label", False):
        raise ValueError("fusionflow.timm: multi-label Mixup is not supported")
    args = [f"mixup_alpha={float(mixup.mixup_alpha)!r}", f"cutmix_alpha={float(mixup.cutmix_alpha)!r}",
            f"prob={float(mixup.mix_prob)!r}", f"switch_prob={float(mixup.switch_prob)!r}", f"mode={mode}",
            f"correct_lam={'true' if mixup.correct_lam else 'false'}",
            f"label_smoothing={float(mixup.label_smoothing)!r}", f"num_classes={int(mixup.num_classes)}"]
    if mixup.cutmix_minmax is not None:
        lo, hi = mixup.cutmix_minmax
        args.insert(2, f"cutmix_minmax=({float(lo)!r}, {float(hi)!r})")
    if not mixup.mixup_enabled:
        raise ValueError("fusionflow.timm: this Mixup has mixup_enabled=False: pass collate_fn=None")
    return "mixup_cutmix(" + ", ".join(args) + ")"


def transform_pipeline(input_size, is_training=False, scale=None, ratio=None, hflip=0.5, vflip=0.,
                       color_jitter=0.4, color_jitter_prob=None, grayscale_prob=0., gaussian_blur_prob=0.,
                       auto_augment=None, interpolation="bilinear", mean=IMAGENET_DEFAULT_MEAN,
                       std=IMAGENET_DEFAULT_STD, re_prob=0., re_mode="const", re_count=1, crop_pct=None,
                       crop_mode=None, dct_scale=False):
    """The pipeline text of timm's create_transform with these arguments (see the module's
    docstring for what is refused). dct_scale=True lets JPEGs decode at 1/2, 1/4 or 1/8 scale
    where the crop allows (faster; the reduction's blur then differs from timm's full decode)."""
    h, w = _size(input_size)
    decode = "decode" if dct_scale else "decode(dct_scale=false)"
    if interpolation not in ("bilinear", "bicubic", "random"):
        raise ValueError(f"fusionflow.timm: interpolation={interpolation!r} is not supported "
                         "(bilinear, bicubic, or random in training)")
    interp = "" if interpolation == "bilinear" else f", interpolation={interpolation}"
    norm = f"normalize(mean={_rgb('mean', mean)}, std={_rgb('std', std)})"
    if not is_training:
        if crop_mode not in (None, "center"):
            raise ValueError(f"fusionflow.timm: crop_mode={crop_mode!r} is not supported (center only)")
        if interpolation == "random":
            raise ValueError("fusionflow.timm: interpolation='random' is for training only (as in timm)")
        pct = crop_pct or DEFAULT_CROP_PCT
        sh, sw = math.floor(h / pct), math.floor(w / pct)
        if sh != sw:
            raise ValueError("fusionflow.timm: a non-square eval size keeps the aspect ratio in timm "
                             "(ResizeKeepRatio), which is not supported")
        return f"{decode} | resize(size={sh}{interp}) | center_crop(size=({h}, {w})) | {norm}"
    scale = tuple(scale or (0.08, 1.0))
    ratio = tuple(ratio or (3. / 4., 4. / 3.))
    ops = [decode, f"random_resized_crop(size=({h}, {w}), scale=({scale[0]!r}, {scale[1]!r}), "
                     f"ratio=({ratio[0]!r}, {ratio[1]!r}){interp})"]
    if hflip > 0:
        ops.append(f"random_horizontal_flip(p={float(hflip)!r})")
    if vflip > 0:
        ops.append(f"random_vertical_flip(p={float(vflip)!r})")
    if auto_augment:
        ops.append(_policy(auto_augment, min(h, w), mean, interpolation))
        if "3a" not in auto_augment:  # timm turns colour jitter off with a policy, but for 3-Augment
            color_jitter = None
    if color_jitter is not None:
        jitter = _color_jitter(color_jitter)
        if jitter and color_jitter_prob is not None:
            jitter = f"random_apply(p={float(color_jitter_prob)!r}, [{jitter}])"
        if jitter:
            ops.append(jitter)
    if grayscale_prob:
        ops.append(f"random_grayscale(p={float(grayscale_prob)!r}, semantics=pil)")
    if gaussian_blur_prob:  # timm's GaussianBlur(kernel_size=23), torchvision's default sigma, on a tensor
        ops.append(f"random_apply(p={float(gaussian_blur_prob)!r}, "
                   "[gaussian_blur(kernel_size=23, sigma=(0.1, 2.0))])")
    ops.append(norm)
    if re_prob > 0:
        if re_mode not in ("const", "rand", "pixel"):
            raise ValueError(f"fusionflow.timm: re_mode={re_mode!r} is not one of timm's (const, rand, pixel)")
        ops.append(f"random_erasing(p={float(re_prob)!r}, mode={re_mode}, max_count={int(re_count)})")
    return " | ".join(ops)


def _color_jitter(cj):
    """timm's ColorJitter arguments: a scalar means (v, v, v) without hue; 3 or 4 values."""
    v = (float(cj),) * 3 if isinstance(cj, (int, float)) else tuple(float(x) for x in cj)
    if len(v) not in (3, 4):
        raise ValueError(f"fusionflow.timm: color_jitter must be a number or 3 or 4 values (got {cj!r})")
    if not any(v):
        return ""
    names = ("brightness", "contrast", "saturation", "hue")
    return "color_jitter(" + ", ".join(f"{n}={x!r}" for n, x in zip(names, v)) + ", semantics=pil)"


def _policy(config, size_min, mean, interpolation):
    """timm's auto_augment string as the timm_* op with create_transform's hparams."""
    if not isinstance(config, str):
        raise ValueError(f"fusionflow.timm: auto_augment must be a string (got {config!r})")
    if "3a" in config.split("-")[0]:
        if config != "3a":
            raise ValueError(f"fusionflow.timm: auto_augment={config!r}: timm's 3-Augment is supported as '3a' "
                             "only, without magnitude noise (mstd)")
        # auto_augment_policy_3a: Solarize(128), Desaturate(1.0) (Color 0: mode L), GaussianBlurRand
        # (ImageFilter.GaussianBlur, radius uniform in (0.1, 2)), one of them per image, on the PIL image
        return "three_augment(color_jitter=0, semantics=pil)"
    op = ("timm_rand_augment" if config.startswith("rand") else
          "timm_aug_mix" if config.startswith("augmix") else "timm_auto_augment")
    img_mean = tuple(min(255, round(255 * float(x))) for x in mean)
    args = [f'config="{config}"', f"img_mean=({img_mean[0]}, {img_mean[1]}, {img_mean[2]})",
            f"translate_const={int(size_min * 0.45)}"]
    if op == "timm_aug_mix":
        args.append("translate_pct=0.3")
    if interpolation != "random":
        args.append(f"interpolation={interpolation}")
    return f"{op}(" + ", ".join(args) + ")"


_DTYPES = {"torch.float32": "float32", "float32": "float32", "torch.bfloat16": "bfloat16", "bfloat16": "bfloat16",
           "torch.float16": "float16", "float16": "float16"}


def create_loader(dataset_or_source, input_size, batch_size, is_training=False, re_prob=0., re_mode="const",
                  re_count=1, scale=None, ratio=None, hflip=0.5, vflip=0., color_jitter=0.4,
                  color_jitter_prob=None, grayscale_prob=0., gaussian_blur_prob=0., auto_augment=None,
                  num_aug_repeats=0, interpolation="bilinear", mean=IMAGENET_DEFAULT_MEAN,
                  std=IMAGENET_DEFAULT_STD, num_workers=1, distributed=False, crop_pct=None, crop_mode=None,
                  collate_fn=None, pin_memory=False, img_dtype=None, device=None, use_prefetcher=True, seed=0,
                  dct_scale=False, permutation="torch", **timm_kwargs):
    """timm.data.create_loader's arguments (timm 1.0) in, a :class:`fusionflow.Loader` out.

    ``dataset_or_source``: what ``timm.data.create_dataset`` returns for a folder (its
    ImageDataset; timm's sample order and labels are kept: the library reads the folder
    when its index lists timm's samples in timm's order, else the bytes come through
    timm's reader), for an image tar (through the reader) or for ``wds/`` shards (a
    ``tar:`` source of the split's shards, labels from ``KEY.cls``, the order ours, not
    timm's stream shuffle); torchvision's ImageFolder; or a folder or list file.
    ``loader.dataset`` is the dataset passed in (timm's train loop calls its
    ``set_epoch`` when it has one), ``loader.sampler.set_epoch`` sets the epoch.

    The order follows timm's samplers by default (``permutation="torch"``):
    DistributedSampler's with ``distributed``, RepeatAugSampler's with
    ``num_aug_repeats`` (index lists equal for seed 0), OrderedDistributedSampler's for
    distributed evaluation; ``permutation="philox"`` draws our own order. ``seed`` and
    ``permutation`` (not timm's) seed and pick the order; ``dct_scale`` (not timm's)
    allows DCT-scaled JPEG decodes (see transform_pipeline). ``img_dtype`` float32,
    bfloat16 or float16 sets the batches' type. Raises ValueError naming any argument
    that cannot be honoured, TypeError for an unknown one.
    """
    for name, value in timm_kwargs.items():
        if name in _NO_EFFECT:
            continue
        if name not in _NOT_SUPPORTED:
            raise TypeError(f"fusionflow.timm.create_loader() got an unexpected keyword argument {name!r}")
        default, why = _NOT_SUPPORTED[name]
        if value != default and not (default is None and value in ((), [])):
            raise ValueError(f"fusionflow.timm: {name}={value!r}: {why}")
    if img_dtype is not None and str(img_dtype) not in _DTYPES:
        raise ValueError(f"fusionflow.timm: img_dtype={img_dtype!r}: batches are float32, bfloat16 or float16")
    pipeline = transform_pipeline(input_size, is_training, scale, ratio, hflip, vflip, color_jitter,
                                  color_jitter_prob, grayscale_prob, gaussian_blur_prob, auto_augment,
                                  interpolation, mean, std, re_prob, re_mode, re_count, crop_pct, crop_mode,
                                  dct_scale)
    if collate_fn is not None:
        if not all(hasattr(collate_fn, a) for a in ("mixup_alpha", "cutmix_alpha", "mix_prob", "mode")):
            raise ValueError("fusionflow.timm: collate_fn must be None or a timm Mixup / FastCollateMixup "
                             "(batches are assembled by the loader)")
        pipeline += " | " + mixup_stage(collate_fn)
    if num_aug_repeats and not (distributed and is_training):
        raise ValueError("fusionflow.timm: num_aug_repeats needs distributed training, as in timm "
                         "(RepeatAugSampler)")
    output_device = "cpu"
    if use_prefetcher and device is not None and getattr(device, "type", str(device).split(":")[0]) == "cuda":
        index = getattr(device, "index", None)
        output_device = f"cuda:{index or 0}"
    source, samples = _source(dataset_or_source)
    settings = dict(batch_size=batch_size, shuffle=bool(is_training), drop_last=bool(is_training), seed=seed,
                    permutation=permutation, num_threads=max(int(num_workers), 1),
                    rank=None if distributed else 0, world_size=None if distributed else 1,
                    repeated_augmentations=int(num_aug_repeats) if is_training else 0,
                    pin_memory=bool(pin_memory), output_device=output_device, device="cpu",
                    dtype=None if img_dtype is None else _DTYPES[str(img_dtype)])
    loader = Loader(source, pipeline, **settings)
    if samples is not None and not _same_samples(loader.dataset, samples):
        loader.close()  # timm sorts otherwise (natural order) or maps classes otherwise: keep timm's samples
        loader = Loader(_SampleFiles(samples), pipeline, **settings)
    if not isinstance(dataset_or_source, (str, bytes, os.PathLike)):
        loader._user_dataset = dataset_or_source
    return loader
