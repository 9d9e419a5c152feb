"""Multi-view pipelines (decode || N x OPS || ...): shapes, determinism across
thread counts, and each view equal to its group's pipeline run alone on the
sample with the view's draws (augment_image with index i + v * 2**52)."""
import pytest

from conftest import make_folder

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")
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


@pytest.mark.parametrize("pipeline", [DINO, DINO.replace(
    "random_horizontal_flip", "random_horizontal_flip | normalize(mean=imagenet, std=imagenet)")])
def test_views_on_an_output_device_are_the_host_views(data, pipeline):
    host = run(data[0], pipeline, 2)
    device = run(data[0], pipeline, 2, device="cpu", output_device="emu:0")
    assert len(host) == len(device)
    for (va, la, ia), (vb, lb, ib) in zip(host, device):
        assert ia == ib and np.array_equal(la, lb) and len(va) == len(vb) == 5
        assert all(a.shape == b.shape and np.array_equal(a, b) for a, b in zip(va, vb))


# ---- the shared decode is the window that holds every view's crop ----------------------------------------
# Each view must equal its group's pipeline run alone on the whole image: the image decoded whole by
# Pillow (libjpeg-turbo with the same settings), stored losslessly as PNG, then augment_image on that PNG
# with the view's draws (they depend on the image's size only). Fixed crops are also compared with
# Pillow's decode directly.

SIZES = [(61, 47), (37, 53)]  # odd sides; every fixed crop below lies in both
KINDS = {"420.jpg": {"subsampling": 2}, "444.jpg": {"subsampling": 0}, "422.jpg": {"subsampling": 1},
         "progressive.jpg": {"progressive": True}, "gray.jpg": {}, "rgb.png": {}}

FIXED = {  # (views, (top, left, height, width))
    # the window lies inside the image, odd corner, a 1-pixel-wide crop
    "inside": [(1, (5, 7, 9, 13)), (2, (17, 3, 11, 1))],
    # the window touches the top and left edges, and the bottom (61x47) or right (37x53) edge
    "edges": [(1, (0, 0, 1, 5)), (1, (30, 24, 17, 13))],
}
RANDOM = {
    "global+local": ["2 x random_resized_crop(size=16, scale=(0.3, 1)) | random_horizontal_flip",
                     "3 x random_resized_crop(size=8, scale=(0.01, 0.1)) | random_horizontal_flip"],
    "small": ["4 x random_resized_crop(size=8, scale=(0.01, 0.06))"],
    # a view that needs the whole image (a crop reaching outside it pads; a resize first): decoded whole
    "whole": ["crop(top=-2, left=3, height=9, width=9)", "resize(size=(20, 20))",
              "crop(top=5, left=7, height=9, width=13)"],
}


def pixels(width, height, seed):
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // (width - 1), y * 255 // (height - 1), ((x // 3 + y // 2) % 2) * 180], axis=-1)
    noise = np.random.default_rng(seed).integers(0, 60, size=(height, width, 3))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """JPEGs of each subsampling (and progressive, gray) and a PNG at two odd sizes; returns (root,
    paths in dataset order, the whole-image decode of each as a PNG)."""
    tmp = tmp_path_factory.mktemp("window")
    root, ref = tmp / "data", tmp / "ref"
    ref.mkdir()
    paths, refs = [], []
    for c, (w, h) in enumerate(SIZES):
        d = root / f"class{c}"
        d.mkdir(parents=True)
        for i, (name, kw) in enumerate(sorted(KINDS.items())):
            img = Image.fromarray(pixels(w, h, 10 * c + i))
            if name.startswith("gray"):
                img = img.convert("L")
            p = d / name
            img.save(p, quality=90, **kw) if name.endswith(".jpg") else img.save(p)
            r = ref / f"{c}_{name}.png"
            Image.open(p).convert("RGB").save(r)
            paths.append(str(p))
            refs.append(str(r))
    return str(root), paths, refs


def crop_text(box):
    return "crop(top=%d, left=%d, height=%d, width=%d)" % box


def expand(name):
    """The view text, each view's ops and, for fixed crops, each view's box."""
    if name in FIXED:
        groups = [(n, crop_text(box), box) for n, box in FIXED[name]]
    else:
        groups = [(int(g.split(" x ")[0]), g.split(" x ")[1], None) if " x " in g else (1, g, None)
                  for g in RANDOM[name]]
    text = "decode || " + " || ".join(f"{n} x {ops}" for n, ops, _ in groups)
    views = [(ops, box) for n, ops, box in groups for _ in range(n)]
    return text, views


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("name", sorted(FIXED) + sorted(RANDOM))
def test_views_from_the_window_equal_each_view_alone_on_the_whole_image(kinds, name, threads):
    root, paths, refs = kinds
    text, views_ops = expand(name)
    for views, _, indices in run(root, text, threads):
        for slot, index in enumerate(indices):
            whole = np.asarray(Image.open(refs[index]))
            for v, (ops, box) in enumerate(views_ops):
                alone = fusionflow.augment_image(refs[index], f"decode(dct_scale=false) | {ops}", seed=11,
                                                 epoch=0, index=index + (v << 52))
                assert np.array_equal(views[v][slot], alone), (name, paths[index], v)
                if box:
                    t, l, h, w = box
                    assert np.array_equal(views[v][slot], whole[t:t + h, l:l + w]), (name, paths[index], v)


def test_rows_below_the_window_are_not_decoded(tmp_path):
    # A JPEG cut off after its first half: views inside the rows that remain are decoded (and equal
    # Pillow's decode of the whole file there); a view that needs the lost rows names the truncation.
    d = tmp_path / "data" / "class0"
    d.mkdir(parents=True)
    whole = tmp_path / "whole.jpg"
    Image.fromarray(pixels(64, 256, 3)).save(whole, quality=90, subsampling=2)
    data = whole.read_bytes()
    (d / "cut.jpg").write_bytes(data[:len(data) // 2])
    ref = np.asarray(Image.open(whole).convert("RGB"))
    top = "decode || 2 x crop(top=0, left=0, height=16, width=32) || crop(top=9, left=31, height=21, width=33)"
    with fusionflow.Loader(str(tmp_path / "data"), top, batch_size=1, output="numpy") as loader:
        views, _ = next(iter(loader))
        assert np.array_equal(np.array(views[1])[0], ref[0:16, 0:32])
        assert np.array_equal(np.array(views[2])[0], ref[9:30, 31:64])
    low = "decode || crop(top=0, left=0, height=16, width=32) || crop(top=230, left=0, height=16, width=32)"
    with fusionflow.Loader(str(tmp_path / "data"), low, batch_size=1, output="numpy") as loader:
        with pytest.raises(fusionflow.DecodeError, match="cut.jpg: truncated JPEG"):
            next(iter(loader))


def test_plan_lists_every_view_and_the_window(data):
    """Loader.plan of a views pipeline: a plan per view (view 0 draws as the sample
    without views), and one decode of the box that holds every view's region."""
    with fusionflow.Loader(data[0], DINO, batch_size=4, seed=11, output="numpy") as loader:
        plan = loader.plan(3)
    with fusionflow.Loader(data[0], f"decode(dct_scale=false) | {GLOBAL}", batch_size=4, seed=11,
                           output="numpy") as alone:
        first = alone.plan(3)
    views = plan["views"]
    assert [v["group"] for v in views] == [0, 0, 1, 1, 1] and "steps" not in plan
    assert views[0]["region"] == first["decode"]["region"] and views[0]["steps"] == first["steps"]
    boxes = [v["region"] for v in views]
    x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    x1, y1 = max(b[0] + b[2] for b in boxes), max(b[1] + b[3] for b in boxes)
    assert plan["decode"]["region"] == [x0, y0, x1 - x0, y1 - y0] and plan["decode"]["dct_scale"] == 1
    assert len({tuple(b) for b in boxes}) == 5  # each view its own draws
