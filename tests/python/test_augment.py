"""The worker side of scale-out (fusionflow._augment.SampleAugmenter over ff_augmenter),
without Ray: samples equal the Loader's for the same (seed, epoch, index) whatever the
order, the threads, the output format and the CPU's vector path; errors are per sample;
and fusionflow.ray without Ray says how to install it. These run in every build, the
sanitizer builds included (test_ray.py needs a Ray cluster)."""
import io
import os
import random
import subprocess
import sys
import tarfile
import textwrap

import numpy as np
import pytest

import fusionflow
from conftest import child_env, have_torch
from fusionflow._augment import SampleAugmenter

NORM = "decode | random_resized_crop(size=32) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"
UINT8 = "decode | random_resized_crop(size=32) | random_horizontal_flip"
# One op for each of the CPU ops' hand-written vector paths (resize, flip, saturation and
# contrast, hue, the bilinear and nearest warps, Pillow's bicubic and bilinear warps, both
# blurs, the byte table, autocontrast's min/max, AugMix's mixing, grayscale).
EVERY_PATH = ("decode | random_resized_crop(size=56) | random_horizontal_flip(p=1) | color(factor=0.3)"
              " | contrast(factor=1.4) | hue(factor=0.2) | rotate(angle=17, interpolation=bilinear)"
              " | translate_x(pixels=3, interpolation=nearest) | pil_rotate(angle=9, interpolation=bicubic)"
              " | pil_shear_x(shear=0.2, interpolation=bilinear) | gaussian_blur(kernel_size=5, sigma=1.3)"
              " | pil_gaussian_blur(radius=1.5) | posterize(bits=5) | autocontrast | aug_mix"
              " | grayscale(num_output_channels=3) | normalize(mean=imagenet, std=imagenet)")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Shard indexes cached in this test's folder, never in the user's."""
    monkeypatch.setenv("FF_CACHE_DIR", str(tmp_path / "cache"))


def loader_samples(source, pipeline, epoch, seed=7, **kw):
    """Every sample of `source` as a Loader makes it in `epoch`, in dataset order."""
    with fusionflow.Loader(source, pipeline, batch_size=64, shuffle=False, seed=seed, output="numpy", **kw) as loader:
        loader.set_epoch(epoch)
        images, labels = next(iter(loader))
        return images.copy(), labels.copy()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def test_samples_equal_the_loaders_in_any_order_and_thread_count(folder):
    root, paths, labels = folder
    want, _ = loader_samples(root, NORM, epoch=2)
    order = list(range(len(paths)))
    random.Random(1).shuffle(order)
    for threads in (1, 3):
        with SampleAugmenter(NORM, seed=7, dtype="float32", num_threads=threads) as aug:
            assert aug.shape == (3, 32, 32)
            images, errors = aug.run(2, [read(paths[i]) for i in order], order)
        assert errors == [] and images.dtype == np.float32
        assert np.array_equal(images, want[order])


def test_uint8_output_is_the_pixels_before_normalize_in_either_layout(folder):
    root, paths, _ = folder
    want, _ = loader_samples(root, UINT8, epoch=1)  # (N, 32, 32, 3) uint8
    datas = [read(p) for p in paths]
    with SampleAugmenter(NORM, seed=7) as hwc, SampleAugmenter(NORM, seed=7, layout="chw") as chw:
        a, _ = hwc.run(1, datas, range(len(paths)))
        b, _ = chw.run(1, datas, range(len(paths)))
    assert a.dtype == np.uint8 and a.shape[1:] == (32, 32, 3) and b.shape[1:] == (3, 32, 32)
    assert np.array_equal(a, want) and np.array_equal(b, want.transpose(0, 3, 1, 2))


@pytest.mark.skipif(not have_torch(), reason="torch is not installed")
def test_uint8_normalised_on_the_trainer_equals_the_loaders_float32(folder):
    """docs/ray.md's normalisation on the trainer gives the Loader's float32 values bit for bit."""
    import torch

    root, paths, _ = folder
    want, _ = loader_samples(root, NORM, epoch=3)
    with SampleAugmenter(NORM, seed=7, layout="chw") as aug:
        images, _ = aug.run(3, [read(p) for p in paths], range(len(paths)))
    mean = torch.tensor((0.485, 0.456, 0.406)).view(1, 3, 1, 1)
    std = torch.tensor((0.229, 0.224, 0.225)).view(1, 3, 1, 1)
    got = torch.from_numpy(images.copy()).float().div_(255).sub_(mean).div_(std)
    assert np.array_equal(got.numpy(), want)


def test_items_without_bytes_are_read_from_the_source(folder):
    root, paths, labels = folder
    want, want_labels = loader_samples(root, NORM, epoch=0)
    with SampleAugmenter(NORM, seed=7, dtype="float32", source=f"imagefolder:{root}") as aug:
        assert aug.dataset_size == len(paths)
        assert aug.samples() == [(p, None, label) for p, label in zip(paths, labels)]
        images, errors = aug.run(0, [None] * len(paths), range(len(paths)))
        assert errors == [] and np.array_equal(images, want)
        _, errors = aug.run(0, [None], [len(paths)])
    assert len(errors) == 1 and isinstance(errors[0][1], fusionflow.InvalidArgumentError)
    assert f"past the source's {len(paths)} samples" in str(errors[0][1])


def test_tar_source_names_shard_members_and_reads_them(folder, tmp_path):
    root, paths, labels = folder
    shard = str(tmp_path / "shard-0.tar")
    with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tar:
        for k, (p, label) in enumerate(zip(paths, labels)):
            for name, data in ((f"s{k:03d}{os.path.splitext(p)[1]}", read(p)), (f"s{k:03d}.cls", str(label).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    want, _ = loader_samples(f"tar:{shard}", NORM, epoch=1)
    with SampleAugmenter(NORM, seed=7, dtype="float32", source=f"tar:{shard}") as aug:
        index = aug.samples()
        images, errors = aug.run(1, [None] * len(index), range(len(index)))
    assert [(s, label) for s, _, label in index] == [(shard, label) for label in labels]
    assert [m for _, m, _ in index] == [f"s{k:03d}{os.path.splitext(p)[1]}" for k, p in enumerate(paths)]
    assert errors == [] and np.array_equal(images, want)


def test_a_corrupt_item_fails_alone_with_the_loaders_exception(folder):
    root, paths, _ = folder
    want, _ = loader_samples(root, UINT8, epoch=0)
    datas = [read(p) for p in paths[:4]]
    datas[2] = datas[2][:40]
    with SampleAugmenter(UINT8, seed=7, num_threads=2) as aug:
        images, errors = aug.run(0, datas, range(4), [f"/data/{k}.jpg" for k in range(4)])
    assert [k for k, _ in errors] == [2]
    assert isinstance(errors[0][1], fusionflow.DecodeError) and str(errors[0][1]).startswith("/data/2.jpg: ")
    assert np.array_equal(images[[0, 1, 3]], want[[0, 1, 3]])


@pytest.mark.parametrize("pipeline, dtype, says", [
    ("decode || 2 x random_resized_crop(size=32) | to_dtype", "float32", "views"),
    (NORM + " | mixup_cutmix(num_classes=3)", "float32", "mixup_cutmix"),
    (NORM + " | random_erasing", "uint8", "random_erasing writes the float output"),
    (UINT8, "float32", "needs a pipeline that ends in normalize or to_dtype"),
])
def test_what_an_augmenter_cannot_run_is_refused_at_open(pipeline, dtype, says):
    with pytest.raises(fusionflow.InvalidArgumentError, match=says):
        SampleAugmenter(pipeline, dtype=dtype)


def test_another_isa_path_gives_the_same_bytes(folder):
    """The same samples in processes whose CPU ops take the AVX2 and the scalar paths
    (FF_CPU_ISA) as in this one (the CPU's widest)."""
    root, paths, _ = folder
    code = textwrap.dedent("""
        import sys
        import fusionflow
        from fusionflow._augment import SampleAugmenter
        aug = SampleAugmenter(sys.argv[2], seed=5, dtype="float32", num_threads=2, source=sys.argv[1])
        images, errors = aug.run(4, [None] * aug.dataset_size, range(aug.dataset_size))
        assert not errors, errors
        sys.stdout.write(fusionflow.cpu_isa() + "\\n")
        sys.stdout.flush()
        sys.stdout.buffer.write(images.tobytes())
    """)
    with SampleAugmenter(EVERY_PATH, seed=5, dtype="float32", source=f"imagefolder:{root}") as aug:
        want, errors = aug.run(4, [None] * len(paths), range(len(paths)))
    assert not errors
    for isa in ("avx2", "scalar"):
        env = dict(child_env(), FF_CPU_ISA=isa)
        out = subprocess.run([sys.executable, "-c", code, f"imagefolder:{root}", EVERY_PATH], env=env,
                             capture_output=True, timeout=120)
        assert out.returncode == 0, out.stderr.decode()[-2000:]
        name, _, pixels = out.stdout.partition(b"\n")
        assert name.decode() in (isa, "scalar")  # a CPU without AVX2 caps at scalar
        assert pixels == want.tobytes(), f"FF_CPU_ISA={isa} gave other bytes"
    assert fusionflow.cpu_isa() in ("avx512", "avx2", "scalar")


def test_fusionflow_ray_without_ray_names_the_pip_command():
    code = textwrap.dedent("""
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed (Debian's Python has none): importing it fails
        try:
            import fusionflow.ray
        except ImportError as e:
            print(type(e).__name__, e)
        else:
            print("imported")
    """)
    out = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "ModuleNotFoundError fusionflow.ray needs Ray: pip install 'fusionflow[ray]'\n"
