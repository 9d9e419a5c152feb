"""Repeated augmentation through the loader: the copies of a sample come in a
row (one rank), share the sample's index and label, and each has its own
augmentation draws; copy 0 draws as the sample does without repeats."""
import pytest

from conftest import make_folder

np = pytest.importorskip("numpy")
import fusionflow  # noqa: E402

PIPE = "decode | random_resized_crop(size=16) | random_horizontal_flip | to_dtype"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_folder(str(tmp_path_factory.mktemp("ra")), classes=2, per_class=5)[0]


def epoch(root, threads=2, **kw):
    with fusionflow.Loader(root, PIPE, batch_size=3, seed=4, num_threads=threads, device="cpu", output="numpy",
                           **kw) as loader:
        out = []
        for x, y in loader:
            out += [(i, np.array(a), int(b)) for i, a, b in zip(loader.last_batch.sample_indices, x, y)]
        return out, len(loader), loader.num_samples


def test_copies_come_in_a_row_with_their_own_draws(data):
    got, _, num = epoch(data, repeated_augmentations=3)
    assert num == 10 == len(got)  # num_selected_samples: ceil(10 / 1)
    plain = {i: a for i, a, _ in epoch(data)[0]}
    for k in range(0, 9, 3):
        (i0, a0, y0), (i1, a1, y1), (i2, a2, y2) = got[k:k + 3]
        assert i0 == i1 == i2 and y0 == y1 == y2
        assert not np.array_equal(a0, a1) and not np.array_equal(a1, a2)
        assert np.array_equal(a0, plain[i0])  # copy 0 draws as without repeats


def test_same_batches_whatever_the_threads(data):
    one, _, _ = epoch(data, threads=1, repeated_augmentations=2, world_size=2, rank=1)
    two, _, _ = epoch(data, threads=3, repeated_augmentations=2, world_size=2, rank=1)
    assert [i for i, _, _ in one] == [i for i, _, _ in two]
    assert all(np.array_equal(a, b) for (_, a, _), (_, b, _) in zip(one, two))


def test_bad_values_are_refused(data):
    with pytest.raises(ValueError, match="repeated_augmentations"):
        fusionflow.Loader(data, PIPE, batch_size=2, repeated_augmentations=-1, device="cpu")
    with pytest.raises(fusionflow.InvalidArgumentError, match="sampler_drop_last"):
        fusionflow.Loader(data, PIPE, batch_size=2, repeated_augmentations=3, sampler_drop_last=True, device="cpu")
