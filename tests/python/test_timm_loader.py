"""fusionflow.timm.create_loader against timm's create_transform / Mixup on the
same images and, for training, the same draws (our crop box and flips
injected into timm's RandomResizedCropAndInterpolation and flip). timm
resamples with Pillow, fusionflow with torchvision's tensor ops: the pixels
agree within a few levels (measured bounds below), the rest exactly."""
import pytest

from conftest import have_torch, make_folder

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
    rrc, flip = ref.transforms[0], ref.transforms[1]
    diffs = []
    for images, _ in loader:
        for x, i in zip(images, loader.last_batch.sample_indices):
            plan = loader.plan(i)
            bx, by, bw, bh = plan["decode"]["region"]
            monkeypatch.setattr(type(rrc), "get_params", staticmethod(lambda *a, **k: (by, bx, bh, bw)))
            flip.p = 1.0 if any(s["op"] == "horizontal_flip" for s in plan["steps"]) else 0.0
            want = ref(Image.open(paths[i]).convert("RGB"))
            diffs.append(np.abs(levels(x) - levels(want)).ravel())
    d = np.concatenate(diffs)
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


@pytest.mark.parametrize("kwargs, message", [
    (dict(auto_augment="rand-m9-mstd0.5-inc1"), "timm's policies"),
    (dict(re_prob=0.25), "random_erasing"),
    (dict(color_jitter=0.4), "color_jitter"),
    (dict(interpolation="bicubic"), "bicubic"),
    (dict(tf_preprocessing=True), "TensorFlow"),
    (dict(num_aug_splits=3), "splits"),
])
def test_what_cannot_be_honoured_is_refused(data, kwargs, message):
    kwargs.setdefault("color_jitter", 0)
    with pytest.raises(ValueError, match=message):
        create_loader(data[0], 24, 2, is_training=True, **kwargs)


def test_unknown_argument_is_a_type_error(data):
    with pytest.raises(TypeError, match="bogus"):
        create_loader(data[0], 24, 2, bogus=1)


def test_pipeline_text_for_eval_defaults():
    assert transform_pipeline(224) == ("decode(dct_scale=false) | resize(size=256) | center_crop(size=(224, 224)) | "
                                       "normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))")
