"""fusionflow.timm.create_loader against timm's create_transform / Mixup on the
same images and, for training, the same draws (our crop box and flips
injected into timm's RandomResizedCropAndInterpolation and flip). timm
resamples with Pillow, fusionflow with torchvision's tensor ops: the pixels
agree within a few levels (measured bounds below), the rest exactly."""
import io
import os
import random
import tarfile

import pytest

from conftest import have_torch, make_folder, make_image

np = pytest.importorskip("numpy")
if not have_torch():
    pytest.skip("torch is not installed", allow_module_level=True)
torch = pytest.importorskip("torch")
timm_data = pytest.importorskip("timm.data")
from PIL import Image  # noqa: E402

import fusionflow  # noqa: E402
from fusionflow.timm import create_loader, transform_pipeline  # noqa: E402

MEAN, STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_folder(str(tmp_path_factory.mktemp("timm")), classes=2, per_class=4, min_size=40, max_size=64)


def levels(x):
    """Normalized CHW float back to 0..255 levels."""
    return (np.asarray(x).transpose(1, 2, 0) * STD + MEAN) * 255


def test_eval_pipeline_matches_create_transform(data):
    root, paths, labels = data
    ref = timm_data.create_transform(32, is_training=False, crop_pct=0.9, interpolation="bilinear")
    loader = create_loader(root, input_size=(3, 32, 32), batch_size=4, is_training=False, crop_pct=0.9,
                           device=torch.device("cpu"), num_workers=2)
    assert "resize(size=35) | center_crop(size=(32, 32))" in loader.pipeline
    diffs = []
    for images, ys in loader:
        for x, i, y in zip(images, loader.last_batch.sample_indices, ys):
            want = ref(Image.open(paths[i]).convert("RGB"))
            assert int(y) == labels[i]
            diffs.append(np.abs(levels(x) - levels(want)))
    d = np.concatenate([a.ravel() for a in diffs])
    assert d.max() < 1.01 and d.mean() < 0.3  # Pillow's vs torchvision's antialiased bilinear


def test_train_pipeline_matches_create_transform_on_our_draws(data, monkeypatch):
    root, paths, _ = data
    loader = create_loader(root, input_size=24, batch_size=2, is_training=True, color_jitter=0, hflip=0.5,
                           scale=(0.3, 1.0), device=torch.device("cpu"), seed=5)
    assert loader.shuffle and loader.drop_last
    ref = timm_data.create_transform(24, is_training=True, color_jitter=0, hflip=0.5, scale=(0.3, 1.0),
                                     interpolation="bilinear")
    d = _compare_on_our_draws(loader, ref, paths, monkeypatch)
    assert d.max() < 1.01 and d.mean() < 0.3  # Pillow's vs torchvision's resampling: a level at most


def test_mixup_collate_becomes_the_batch_stage(data):
    mix = timm_data.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=2, mode="pair")
    loader = create_loader(data[0], 24, 4, is_training=True, color_jitter=0, collate_fn=mix,
                           device=torch.device("cpu"))
    assert "mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0" in loader.pipeline and "mode=pair" in loader.pipeline
    images, targets = next(iter(loader))
    assert targets.shape == (4, 2) and torch.allclose(targets.sum(1), torch.ones(4))


def test_repeats_and_distribution(data, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    loader = create_loader(data[0], 24, 2, is_training=True, color_jitter=0, distributed=True, num_aug_repeats=3,
                           device=torch.device("cpu"))
    assert loader.world_size == 2 and loader.rank == 1 and loader.num_samples == 4  # ceil(8 / 2)
    with pytest.raises(ValueError, match="needs distributed"):
        create_loader(data[0], 24, 2, is_training=True, color_jitter=0, num_aug_repeats=3)


def _policy_hparams(policy):
    """The hparams of timm's first op in a RandAugment / AugMixAugment / AutoAugment."""
    ops = getattr(policy, "ops", None) or policy.policy[0]
    return ops[0].hparams


@pytest.mark.parametrize("config, op", [("rand-m9-mstd0.5-inc1", "timm_rand_augment"),
                                        ("augmix-m5-w4-d2", "timm_aug_mix"),
                                        ("original-mstd0.5", "timm_auto_augment")])
@pytest.mark.parametrize("interpolation", ["bicubic", "random"])
def test_auto_augment_takes_create_transforms_hparams(config, op, interpolation):
    ref = timm_data.create_transform(24, is_training=True, auto_augment=config, interpolation=interpolation)
    names = [type(t).__name__ for t in ref.transforms]
    assert "ColorJitter" not in names  # timm turns the jitter off with a policy; so do we
    hp = _policy_hparams(ref.transforms[2])
    ours = transform_pipeline(24, True, auto_augment=config, interpolation=interpolation)
    assert "color_jitter" not in ours
    m = f'{op}(config="{config}", img_mean=({hp["img_mean"][0]}, {hp["img_mean"][1]}, {hp["img_mean"][2]}), ' \
        f'translate_const={hp["translate_const"]}'
    if op == "timm_aug_mix":
        m += f", translate_pct={hp['translate_pct']}"
    if interpolation == "random":
        assert "interpolation" not in hp and m + ")" in ours  # the op's default is timm's random choice
    else:
        assert m + f", interpolation={interpolation})" in ours


def _compare_on_our_draws(loader, ref, paths, monkeypatch, blur=None, inject=None, epochs=1):
    """Our batches against timm's transform given our crop, flip and blur draws (inject(plan):
    any further draws to hand timm, with monkeypatch)."""
    rrc, flip = ref.transforms[0], ref.transforms[1]
    diffs = []
    for _ in range(epochs):
        for images, _ in loader:
            for x, i in zip(images, loader.last_batch.sample_indices):
                plan = loader.plan(i)
                bx, by, bw, bh = plan["decode"]["region"]
                monkeypatch.setattr(type(rrc), "get_params", staticmethod(lambda *a, **k: (by, bx, bh, bw)))
                flip.p = 1.0 if any(s["op"] == "horizontal_flip" and s.get("applied", True)
                                    for s in plan["steps"]) else 0.0
                if blur is not None:
                    sigma = [s["sigma"] for s in plan["steps"] if s["op"] == "gaussian_blur"][0]
                    monkeypatch.setattr(type(blur), "get_params", staticmethod(lambda *a, **k: float(sigma)))
                if inject is not None:
                    inject(plan)
                want = ref(Image.open(paths[i]).convert("RGB"))
                diffs.append(np.abs(levels(x) - levels(want)).ravel())
    return np.concatenate(diffs)


def test_bicubic_crop_matches_create_transform_on_our_draws(data, monkeypatch):
    root, paths, _ = data
    loader = create_loader(root, 24, 2, is_training=True, color_jitter=0, interpolation="bicubic",
                           scale=(0.3, 1.0), device=torch.device("cpu"), seed=3)
    assert "interpolation=bicubic" in loader.pipeline
    ref = timm_data.create_transform(24, is_training=True, color_jitter=0, scale=(0.3, 1.0),
                                     interpolation="bicubic")
    d = _compare_on_our_draws(loader, ref, paths, monkeypatch)
    assert d.max() < 6.01 and d.mean() < 0.3  # Pillow's bicubic vs torchvision's antialiased tensor bicubic


def test_grayscale_and_blur_match_create_transform_on_our_draws(data, monkeypatch):
    root, paths, _ = data
    kw = dict(color_jitter=0, grayscale_prob=1.0, gaussian_blur_prob=1.0, scale=(0.3, 1.0))
    loader = create_loader(root, 24, 2, is_training=True, device=torch.device("cpu"), seed=4, **kw)
    ref = timm_data.create_transform(24, is_training=True, interpolation="bilinear", **kw)
    blur = [t for t in ref.transforms if type(t).__name__ == "RandomApply"][0].transforms[0]
    assert type(blur).__name__ == "GaussianBlur" and blur.kernel_size == (23, 23)
    d = _compare_on_our_draws(loader, ref, paths, monkeypatch, blur=blur)
    # grayscale is Pillow's convert("L") on both sides; the blur is the same tensor op (timm's
    # torchvision GaussianBlur converts the PIL image to a tensor); the crop's resampling differs
    assert "random_grayscale(p=1.0, semantics=pil)" in loader.pipeline
    assert d.max() < 2.01 and d.mean() < 0.7


def test_three_augment_3a_matches_create_transform_on_our_draws(data, monkeypatch):
    """timm's auto_augment="3a" on a PIL image (Solarize, Desaturate or GaussianBlurRand):
    three_augment(semantics=pil), our choice and radius injected into timm's draws."""
    import timm.data.auto_augment as taa
    root, paths, _ = data
    kw = dict(color_jitter=0, auto_augment="3a", scale=(0.3, 1.0))
    loader = create_loader(root, 24, 2, is_training=True, device=torch.device("cpu"), seed=6, **kw)
    assert "three_augment(color_jitter=0, semantics=pil)" in loader.pipeline
    ref = timm_data.create_transform(24, is_training=True, interpolation="bilinear", **kw)
    chosen = set()

    def inject(plan):  # AutoAugment's random.choice of the sub-policy, GaussianBlurRand's random.uniform
        op = [s for s in plan["steps"] if s["op"].startswith("pil_")]
        assert len(op) == 1, plan["steps"]
        k = ["pil_solarize", "pil_color", "pil_gaussian_blur"].index(op[0]["op"])
        chosen.add(k)
        monkeypatch.setattr(taa.random, "choice", lambda seq: seq[k])
        monkeypatch.setattr(taa.random, "uniform", lambda lo, hi: op[0]["arg"])
    d = _compare_on_our_draws(loader, ref, paths, monkeypatch, inject=inject, epochs=3)
    assert chosen == {0, 1, 2}
    assert d.max() < 2.01 and d.mean() < 0.7  # the crop's resampling only: the three ops are Pillow's


def test_jitter_and_erasing_map_to_the_ops(data):
    text = transform_pipeline(24, True, color_jitter=(0.4, 0.3, 0.2, 0.1), color_jitter_prob=0.8, re_prob=0.25,
                              re_mode="pixel", re_count=2)
    assert ("random_apply(p=0.8, [color_jitter(brightness=0.4, contrast=0.3, saturation=0.2, hue=0.1, "
            "semantics=pil)])" in text)
    assert text.endswith("| random_erasing(p=0.25, mode=pixel, max_count=2)")
    assert "color_jitter(brightness=0.4, contrast=0.4, saturation=0.4, semantics=pil)" in transform_pipeline(24, True)
    # timm keeps the colour jitter on after its 3-Augment policy
    assert "three_augment(color_jitter=0, semantics=pil) | color_jitter(brightness=0.4" in \
        transform_pipeline(24, True, auto_augment="3a")
    loader = create_loader(data[0], 24, 2, is_training=True, re_prob=1.0, re_mode="const",
                           device=torch.device("cpu"))
    images, _ = next(iter(loader))
    assert bool((images == 0).all(dim=1).any())  # timm's const mode erases to 0 after normalize


@pytest.mark.parametrize("kwargs, message", [
    (dict(auto_augment="3a-mstd0.5"), "3-Augment"),
    (dict(re_prob=0.25, re_mode="noise"), "re_mode"),
    (dict(interpolation="nearest"), "interpolation"),
    (dict(tf_preprocessing=True), "TensorFlow"),
    (dict(num_aug_splits=3), "splits"),
])
def test_what_cannot_be_honoured_is_refused(data, kwargs, message):
    kwargs.setdefault("color_jitter", 0)
    with pytest.raises(ValueError, match=message):
        create_loader(data[0], 24, 2, is_training=True, **kwargs)
    with pytest.raises(ValueError, match="training only"):
        create_loader(data[0], 24, 2, is_training=False, interpolation="random")


def test_unknown_argument_is_a_type_error(data):
    with pytest.raises(TypeError, match="bogus"):
        create_loader(data[0], 24, 2, bogus=1)


def test_pipeline_text_for_eval_defaults():
    assert transform_pipeline(224) == ("decode(dct_scale=false) | resize(size=256) | center_crop(size=(224, 224)) | "
                                       "normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))")


# ---------------------------------------------------------------- what timm.data.create_dataset gives

def _timm_reference(samples, pipeline, tmp_path, **kw):
    """The batches of a list-file loader over timm's own (path, label) list: the same
    samples at the same indices, so the same draws and bytes."""
    listing = tmp_path / "timm-order.tsv"
    listing.write_text("".join(f"{p}\t{y}\n" for p, y in samples))
    with fusionflow.Loader(str(listing), pipeline, output="numpy", **kw) as loader:
        return [(np.asarray(x).copy(), np.asarray(y).copy(), loader.last_batch.sample_indices) for x, y in loader]


def _batches(loader):
    return [(np.asarray(x).copy(), np.asarray(y).copy(), loader.last_batch.sample_indices) for x, y in loader]


def _assert_same(a, b):
    assert len(a) == len(b) > 0
    for (xa, ya, ia), (xb, yb, ib) in zip(a, b):
        assert ia == ib
        np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(xa, xb)


@pytest.mark.parametrize("is_training", [True, False])
def test_create_dataset_folder_is_served_in_timms_order(data, tmp_path, is_training):
    """timm's ImageDataset of a folder (the root at .reader.root): the loader's sample i is
    timm's sample i, for training and evaluation; loader.dataset is timm's dataset."""
    ds = timm_data.create_dataset("", root=data[0], split="train", is_training=is_training)
    loader = create_loader(ds, 24, 2, is_training=is_training, color_jitter=0, device=torch.device("cpu"))
    assert loader.dataset is ds and isinstance(loader.source, str)  # the library reads the folder
    for i, (path, label) in enumerate(ds.reader.samples):
        plan = loader.plan(i)
        assert os.path.normpath(plan["path"]) == os.path.normpath(path) and plan["label"] == label
    want = _timm_reference(ds.reader.samples, loader.pipeline, tmp_path, batch_size=2, shuffle=is_training,
                           drop_last=is_training, permutation="torch")
    _assert_same(_batches(loader), want)


def test_create_dataset_folder_in_natural_order_keeps_timms_indices(tmp_path):
    """timm sorts file names naturally (img2 before img10), torchvision and the library by
    code point: the loader then reads timm's samples through their paths, index for index."""
    rng = random.Random(3)
    for c in ("a", "b"):
        os.makedirs(tmp_path / "nat" / c)
        for k in (1, 2, 10, 11):
            make_image(str(tmp_path / "nat" / c / f"img{k}.jpg"), 40, 36, rng)
    ds = timm_data.create_dataset("", root=str(tmp_path / "nat"), split="validation")
    assert [os.path.basename(p) for p, _ in ds.reader.samples[:4]] == ["img1.jpg", "img2.jpg", "img10.jpg",
                                                                          "img11.jpg"]
    loader = create_loader(ds, 24, 2, device=torch.device("cpu"))
    assert not isinstance(loader.source, str) and loader.dataset is ds
    want = _timm_reference(ds.reader.samples, loader.pipeline, tmp_path, batch_size=2, shuffle=False)
    _assert_same(_batches(loader), want)


def test_create_dataset_image_tar_is_read_through_timms_reader(data, tmp_path):
    root, paths, labels = data
    tar_path = str(tmp_path / "images.tar")
    with tarfile.open(tar_path, "w") as tar:
        for p in paths:
            tar.add(p, arcname=os.path.relpath(p, root))
    ds = timm_data.create_dataset("", root=tar_path, split="validation")
    loader = create_loader(ds, 24, 2, device=torch.device("cpu"))
    got = _batches(loader)
    assert sorted(i for _, _, idx in got for i in idx) == list(range(len(paths)))
    for _, ys, idx in got:  # timm's labels for timm's indices
        assert list(ys) == [ds.reader.targets[i] for i in idx]
    by_name = {os.path.relpath(p, root): p for p in paths}
    samples = [(by_name[s[0].name], y) for s, y in zip(ds.reader.samples, ds.reader.targets)]
    _assert_same(got, _timm_reference(samples, loader.pipeline, tmp_path, batch_size=2, shuffle=False))


def test_create_dataset_wds_shards_become_a_tar_source(data, tmp_path, monkeypatch):
    root, paths, labels = data
    monkeypatch.setenv("FF_CACHE_DIR", str(tmp_path / "cache"))
    shards = tmp_path / "wds"
    shards.mkdir()
    for s in range(2):
        with tarfile.open(shards / f"part-{s:03d}.tar", "w") as tar:
            for k in range(s * 4, s * 4 + 4):
                ext = os.path.splitext(paths[k])[1]
                tar.add(paths[k], arcname=f"{k:05d}{ext}")
                info = tarfile.TarInfo(f"{k:05d}.cls")
                info.size = len(str(labels[k]))
                tar.addfile(info, io.BytesIO(str(labels[k]).encode()))
    ds = timm_data.create_dataset("wds/demo", root=str(shards), split="part-{000..001}.tar|8")
    loader = create_loader(ds, 24, 2, device=torch.device("cpu"))
    assert loader.source == "tar:" + "::".join(str(shards / f"part-{s:03d}.tar") for s in range(2))
    assert loader.dataset is ds
    want = _timm_reference(list(zip(paths, labels)), loader.pipeline, tmp_path, batch_size=2, shuffle=False)
    _assert_same(_batches(loader), want)


@pytest.mark.parametrize("repeats", [0, 3])
def test_distributed_training_order_is_timms_sampler(data, monkeypatch, repeats):
    """create_loader(distributed=True) orders as timm's loader: DistributedSampler, or
    RepeatAugSampler with num_aug_repeats, index list for index list, epoch by epoch."""
    from timm.data.distributed_sampler import RepeatAugSampler
    from torch.utils.data.distributed import DistributedSampler

    ds = timm_data.create_dataset("", root=data[0], split="train", is_training=True)
    monkeypatch.setenv("WORLD_SIZE", "2")
    for rank in range(2):
        monkeypatch.setenv("RANK", str(rank))
        ref = (RepeatAugSampler(ds, num_replicas=2, rank=rank, num_repeats=repeats) if repeats else
               DistributedSampler(ds, num_replicas=2, rank=rank))
        loader = create_loader(ds, 24, 1, is_training=True, color_jitter=0, distributed=True,
                               num_aug_repeats=repeats, device=torch.device("cpu"))
        for epoch in (0, 1, 5):
            ref.set_epoch(epoch)
            loader.sampler.set_epoch(epoch)  # what train.py's _set_loader_epoch reaches
            want = list(ref)
            assert list(loader.sampler) == want and len(loader.sampler) == len(ref)
            assert [i for _, _, idx in _batches(loader) for i in idx] == want
        loader.close()


def test_distributed_eval_order_is_timms_ordered_sampler(data, monkeypatch):
    from timm.data.distributed_sampler import OrderedDistributedSampler

    ds = timm_data.create_dataset("", root=data[0], split="validation")
    monkeypatch.setenv("WORLD_SIZE", "3")
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        loader = create_loader(ds, 24, 2, distributed=True, device=torch.device("cpu"))
        want = list(OrderedDistributedSampler(ds, num_replicas=3, rank=rank))
        assert list(loader.sampler) == want == [i for _, _, idx in _batches(loader) for i in idx]
        loader.close()


def test_permutation_is_accepted_and_philox_differs(data):
    a = create_loader(data[0], 24, 1, is_training=True, color_jitter=0, device=torch.device("cpu"))
    b = create_loader(data[0], 24, 1, is_training=True, color_jitter=0, permutation="philox",
                      device=torch.device("cpu"))
    assert a.permutation == "torch" and b.permutation == "philox"
    assert list(a.sampler) == torch.randperm(8, generator=torch.Generator().manual_seed(0)).tolist()
    assert list(a.sampler) != list(b.sampler)


def test_img_dtype_sets_the_batch_type(data):
    loader = create_loader(data[0], 24, 2, img_dtype=torch.bfloat16, device=torch.device("cpu"))
    images, _ = next(iter(loader))
    assert images.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        create_loader(data[0], 24, 2, img_dtype=torch.float64)
