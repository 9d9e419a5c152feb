"""Multi-view pipelines (decode || N x OPS || ...): shapes, determinism across
thread counts, and each view equal to its group's pipeline run alone on the
sample with the view's draws (augment_image with index i + v * 2**52)."""
import pytest

from conftest import make_folder

np = pytest.importorskip("numpy")
import fusionflow  # noqa: E402

GLOBAL = "random_resized_crop(size=24, scale=(0.4, 1)) | random_horizontal_flip"
LOCAL = "random_resized_crop(size=12, scale=(0.05, 0.4)) | random_horizontal_flip"
DINO = f"decode || 2 x {GLOBAL} || 3 x {LOCAL}"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_folder(str(tmp_path_factory.mktemp("views")), classes=2, per_class=5)


def run(root, pipeline, threads, **kw):
    with fusionflow.Loader(root, pipeline, batch_size=4, seed=11, num_threads=threads, output="numpy", **kw) as loader:
        out = []
        for views, labels in loader:
            out.append(([np.array(v) for v in views], np.array(labels), list(loader.last_batch.sample_indices)))
        return out


def test_shapes_one_tensor_per_view(data):
    batches = run(data[0], DINO, 2)
    views, labels, _ = batches[0]
    assert [v.shape for v in views] == [(4, 24, 24, 3)] * 2 + [(4, 12, 12, 3)] * 3
    assert labels.shape == (4,)
    norm = run(data[0], DINO.replace("random_horizontal_flip", "random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"), 1)
    assert [v.shape for v in norm[0][0]] == [(4, 3, 24, 24)] * 2 + [(4, 3, 12, 12)] * 3
    assert norm[0][0][0].dtype == np.float32


def test_same_views_whatever_the_threads(data):
    one, three = run(data[0], DINO, 1), run(data[0], DINO, 3)
    for (va, la, ia), (vb, lb, ib) in zip(one, three):
        assert ia == ib and np.array_equal(la, lb)
        assert all(np.array_equal(a, b) for a, b in zip(va, vb))


def test_each_view_is_its_group_pipeline_on_the_views_draws(data):
    root, paths, _ = data
    groups = [GLOBAL] * 2 + [LOCAL] * 3
    for views, _, indices in run(root, DINO, 2):
        for slot, index in enumerate(indices):
            for v, ops in enumerate(groups):
                alone = fusionflow.augment_image(paths[index], f"decode(dct_scale=false) | {ops}", seed=11, epoch=0,
                                                 index=index + (v << 52))
                assert np.array_equal(views[v][slot], np.asarray(alone)), (index, v)
    # the views differ from each other (their own draws)
    views = run(root, DINO, 2)[0][0]
    assert not np.array_equal(views[0], views[1]) and not np.array_equal(views[2], views[3])


@pytest.mark.parametrize("text, message", [
    (f"decode | center_crop(size=8) || {GLOBAL}", "'decode' alone before the first"),
    (f"decode(dct_scale=true) || {GLOBAL}", "'decode' alone"),
    (f"decode || 2 x {GLOBAL} || 2 x rotate(angle=10)", "view group 2"),
    (f"decode || 2 x {GLOBAL} | normalize(mean=0, std=1) | mixup_cutmix()", "does not take views"),
])
def test_bad_view_text_is_named(data, text, message):
    with pytest.raises(fusionflow.PipelineError, match=message):
        fusionflow.Loader(data[0], text, batch_size=4)


def test_views_run_on_the_cpu(data):
    with pytest.raises(fusionflow.InvalidArgumentError, match="views runs on the CPU"):
        fusionflow.Loader(data[0], DINO, batch_size=4, device="emu:0")
