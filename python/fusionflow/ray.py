"""fusionflow inside Ray: the Loader's augmentations as a Ray Data ``map_batches`` callable,
and remote CPU workers that take a Loader's deficit (``Loader(..., remote=Workers(N))``,
docs/remote.md).

    import ray, fusionflow.ray
    root = "/data/train"
    ds = ray.data.read_binary_files(root, include_paths=True)          # columns bytes, path
    ds = ds.map_batches(fusionflow.ray.Augment, fn_constructor_kwargs=dict(
             pipeline="decode | random_resized_crop(size=224) | random_horizontal_flip"
                      " | normalize(mean=imagenet, std=imagenet)",
             seed=0, epoch=0, source=f"imagefolder:{root}"),
         compute=ray.data.ActorPoolStrategy(size=4), num_cpus=2,        # 4 actors of 2 threads
         batch_size=64)
    # rows: image (224, 224, 3) uint8, label int64, index int64

Each actor decodes and augments its batches in the C library on ``num_cpus``
threads of its own (the GIL released), with the draws a ``fusionflow.Loader``
with the same seed makes for the same sample index and epoch: the pixels equal
the Loader's, bit for bit. docs/ray.md tells the whole story (indices, labels,
epochs, errors, Ray Train). Needs Ray: ``pip install 'fusionflow[ray]'``.
"""
import logging
import math
import os

try:
    import ray
except ModuleNotFoundError as e:
    if e.name != "ray":
        raise
    raise ModuleNotFoundError("fusionflow.ray needs Ray: pip install 'fusionflow[ray]'", name="ray") from None
if not hasattr(ray, "remote"):  # a folder named ray on sys.path (Ray's own /tmp/ray, say), not Ray
    raise ModuleNotFoundError(f"fusionflow.ray needs Ray: pip install 'fusionflow[ray]' ('import ray' found "
                              f"{list(getattr(ray, '__path__', [])) or ray!r}, not Ray)", name="ray")

from . import _errors
from . import _fusionflow as _c
from ._augment import SampleAugmenter
from ._remote import Workers

__all__ = ["Augment", "Epoch", "SkippedSamples", "Workers"]

_log = logging.getLogger("fusionflow.ray")

# A tar: source's image members, in the order it prefers them (read_webdataset's columns).
_IMAGE_SUFFIXES = ("jpg", "jpeg", "png", "webp")
_ON_ERROR = ("raise", "skip")


@ray.remote(num_cpus=0)
class _Value:
    def __init__(self, value):
        self.value = value

    def set(self, value):
        self.value = value

    def get(self):
        return self.value


@ray.remote(num_cpus=0)
class _SkipLog:
    def __init__(self, keep):
        self.keep, self.count, self.samples = keep, 0, []

    def add(self, messages):
        self.count += len(messages)
        self.samples.extend(messages[:max(0, self.keep - len(self.samples))])

    def get(self):
        return self.count, list(self.samples)


class Epoch:
    """An epoch number that Augment's actors read when they start: fresh draws each epoch
    from one dataset (Ray Train's), set by the driver or the trainer's rank 0 before the
    epoch's iteration begins (docs/ray.md). A small Ray actor (0 CPUs) holds it.

    Args:
        epoch (int): the first value (default 0).
    """

    def __init__(self, epoch=0):
        self._actor = _Value.remote(_check_epoch(epoch))

    def set(self, epoch):
        """Sets the epoch for the Augment actors that start from now on (waits until it is set)."""
        ray.get(self._actor.set.remote(_check_epoch(epoch)))

    def get(self):
        """The epoch now."""
        return ray.get(self._actor.get.remote())


class SkippedSamples:
    """Counts the samples that Augment(on_error="skip") leaves out, over all its actors.

    Pass it as Augment's ``skipped=``; read ``count`` and ``samples`` ("name: reason", the
    first ``keep`` of them) after the dataset ran. A small Ray actor (0 CPUs) holds them.
    """

    def __init__(self, keep=1000):
        self._actor = _SkipLog.remote(keep)

    def _add(self, messages):
        ray.get(self._actor.add.remote(messages))

    @property
    def count(self):
        """Samples left out so far."""
        return ray.get(self._actor.get.remote())[0]

    @property
    def samples(self):
        """"name: reason" of the first ``keep`` samples left out."""
        return ray.get(self._actor.get.remote())[1]


def _check_epoch(epoch):
    if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < 1 << 64:
        raise ValueError(f"fusionflow.ray: epoch must be an int in [0, 2**64) or an Epoch (got {epoch!r})")
    return epoch


def _actor_cpus():
    """The CPUs Ray gave this worker (map_batches' num_cpus), rounded up; 0 outside a Ray worker."""
    try:
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 0) if ray.is_initialized() else 0
    except Exception:  # an older or partial runtime context: fall back to the cores
        cpus = 0
    return max(1, math.ceil(cpus)) if cpus else 0


def _norm_path(path):
    """A path as both sides name it: without a local scheme, absolute, normalised."""
    for scheme in ("local://", "file://"):
        if path.startswith(scheme):
            path = path[len(scheme):]
    return os.path.normpath(os.path.abspath(path))


def _tar_key(member):
    """WebDataset's sample key of a member: its path up to the first dot of its base name."""
    folder, _, base = member.rpartition("/")
    return (folder + "/" if folder else "") + base.split(".", 1)[0]


def _columns(batch):
    """A batch in any of map_batches' formats as {column: sequence}."""
    if hasattr(batch, "column_names") and hasattr(batch, "column"):  # batch_format="pyarrow"
        return {c: batch.column(c).to_pylist() for c in batch.column_names}
    if hasattr(batch, "columns") and hasattr(batch, "to_numpy"):  # batch_format="pandas"
        return {c: batch[c].to_numpy() for c in batch.columns}
    return dict(batch)


def _label_value(v):
    if isinstance(v, (bytes, str)):  # a WebDataset .cls member, raw
        return int(v.decode() if isinstance(v, bytes) else v)
    return int(v)


class Augment:
    """A Ray Data ``map_batches`` callable class: each row's encoded image through ``pipeline``.

    Use it as ``ds.map_batches(fusionflow.ray.Augment, fn_constructor_kwargs={...},
    compute=ray.data.ActorPoolStrategy(size=N), num_cpus=threads, batch_size=B)`` (before Ray
    2.51: ``concurrency=N``): N actors, each running the C library on ``threads`` threads. The
    rows it takes:

    - ``ray.data.read_binary_files(ROOT, include_paths=True)``: ``bytes`` and ``path``;
    - ``ray.data.read_webdataset(SHARDS, decoder=None)``: ``__url__``, ``__key__`` and the raw
      members (``jpg``/``jpeg``/``png``/``webp``, ``cls``);
    - any rows with an index column (and the bytes, or a ``source`` to read them from).

    Not ``read_images`` (its rows are decoded arrays) nor ``read_webdataset`` with its default
    decoder (it decodes images with PIL): fusionflow decodes the encoded bytes itself.

    Args:
        pipeline (str): as for Loader (fixed output size; no views or mixup_cutmix).
        seed (int): the Loader's seed.
        epoch (int or Epoch): the epoch whose draws the actors make (read when each starts).
            Ray Data knows no epochs: for fresh draws run a new ``map_batches`` per epoch,
            or pass an Epoch that the driver sets before each one.
        source (str): the Loader's source ("imagefolder:ROOT", "tar:PATTERN" of local shards,
            "list:FILE"), indexed in each actor: a row's sample index is its file's (its
            shard member's) position in that index, as Loader(source) numbers it. Needed
            unless ``index_column`` gives it; also reads the bytes of rows without them.
        index_column (str): a column holding each row's sample index, instead of looking
            the path up in ``source``'s index.
        labels: ``"source"`` (the default with a source): the label the source gives the
            sample (ImageFolder's class order, the list's label, the shard's KEY.cls); a
            column name (ints, or a WebDataset ``cls`` member's raw bytes); a callable
            ``f(name) -> int`` of the row's path (WebDataset: ``URL:KEY.SUFFIX``); None: no
            ``label`` column (the default without a source).
        dtype (str): ``"uint8"`` (default: the pixels before a final normalize/to_dtype,
            which the trainer applies; a quarter of float32's object-store bytes),
            ``"float32"`` or ``"float16"`` (the Loader's normalized values).
        layout (str): ``"hwc"`` (uint8's default: ``(H, W, 3)``) or ``"chw"`` (the float
            types' default: ``(3, H, W)``).
        on_error (str): a row that cannot be read or decoded: ``"raise"`` (default) fails
            the dataset with the Loader's exception naming the file; ``"skip"`` drops the
            row, logs it (logger ``fusionflow.ray``) and counts it in ``skipped``.
        skipped (SkippedSamples): collects the rows dropped under ``on_error="skip"``.
        num_threads (int): threads per actor; None: the CPUs the actor was given
            (``num_cpus``), else the cores this process may use.
        semantics, max_image_pixels, strict_decode: as for Loader.
        bytes_column (str): the column of encoded images (default ``bytes``, else the
            WebDataset image members).
        keep_columns (sequence of str): input columns passed through to the output.

    Each call returns ``{"image": (B, ...) dtype, "index": (B,) int64, "label": (B,) int64}``
    (``label`` only with labels), B the rows that succeeded.
    """

    def __init__(self, pipeline, *, seed=0, epoch=0, source=None, index_column=None, labels="source", dtype="uint8",
                 layout=None, on_error="raise", skipped=None, num_threads=None, semantics="v1",
                 max_image_pixels=_c.DEFAULT_MAX_IMAGE_PIXELS, strict_decode=False, bytes_column=None,
                 keep_columns=()):
        if on_error not in _ON_ERROR:
            raise ValueError(f"fusionflow.ray.Augment: on_error must be 'raise' or 'skip' (got {on_error!r}; "
                             f"'replace' needs the Loader's epoch order)")
        if source is None and index_column is None:
            raise ValueError("fusionflow.ray.Augment: give source= (the Loader's source, whose index numbers the "
                             "paths) or index_column= (a column of sample indices)")
        if labels == "source" and source is None:
            labels = None
        if not (labels is None or labels == "source" or isinstance(labels, str) or callable(labels)):
            raise TypeError(f"fusionflow.ray.Augment: labels must be 'source', a column name, a callable or None "
                            f"(got {labels!r})")
        if skipped is not None and not isinstance(skipped, SkippedSamples):
            raise TypeError("fusionflow.ray.Augment: skipped must be a fusionflow.ray.SkippedSamples")
        self.epoch = epoch.get() if isinstance(epoch, Epoch) else _check_epoch(epoch)
        self.on_error, self.skipped_count = on_error, 0
        self._skipped, self._labels = skipped, labels
        self._index_column, self._bytes_column = index_column, bytes_column
        self._keep = tuple(keep_columns)
        self._source = source
        self._aug = SampleAugmenter(pipeline, seed=seed, dtype=dtype, layout=layout,
                                    num_threads=_actor_cpus() if num_threads is None else num_threads,
                                    semantics=semantics, max_image_pixels=max_image_pixels,
                                    strict_decode=strict_decode, source=source)
        self._by_path, self._source_labels = {}, None
        if source is not None:
            import numpy as np

            index = self._aug.samples()
            self._source_labels = np.array([label for _, _, label in index], dtype=np.int64)
            for i, (path, member, _) in enumerate(index):
                self._by_path[(_norm_path(path), _tar_key(member)) if member is not None else _norm_path(path)] = i

    # -- one batch ---------------------------------------------------------------------

    def _rows(self, cols, n):
        """Per row: its encoded bytes (or None: read it from the source), its name, and its
        lookup key in the source's index."""
        if self._bytes_column is not None:
            datas = list(cols[self._bytes_column])
        elif "bytes" in cols:
            datas = list(cols["bytes"])
        else:
            suffixes = [s for s in _IMAGE_SUFFIXES if s in cols]
            datas = [next((cols[s][r] for s in suffixes if isinstance(cols[s][r], bytes)), None) for r in range(n)]
            if not suffixes:
                datas = [None] * n
        if "path" in cols:
            names = [str(p) for p in cols["path"]]
            keys = [_norm_path(p) for p in names]
        elif "__url__" in cols and "__key__" in cols:
            urls, tkeys = cols["__url__"], cols["__key__"]
            suffix = [next((s for s in _IMAGE_SUFFIXES if s in cols and isinstance(cols[s][r], bytes)), "")
                      for r in range(n)]
            names = [f"{urls[r]}:{tkeys[r]}.{suffix[r]}" for r in range(n)]
            keys = [(_norm_path(str(urls[r])), str(tkeys[r])) for r in range(n)]
        else:
            names, keys = [None] * n, [None] * n
        datas = [d if isinstance(d, bytes) else None for d in datas]
        return datas, names, keys

    def _indices(self, cols, keys, names, n):
        """Per row its sample index, or the reason it has none."""
        if self._index_column is not None:
            return [int(i) for i in cols[self._index_column]], {}
        indices, missing = [0] * n, {}
        for r, key in enumerate(keys):
            i = self._by_path.get(key) if key is not None else None
            if i is None:
                what = names[r] or f"row {r}"
                missing[r] = _errors.InvalidArgumentError(
                    f"{what}: not in the index of {self._source} (no path column, or a file the source does "
                    f"not hold)", _c.FF_EINVAL)
            else:
                indices[r] = i
        return indices, missing

    def _label_column(self, cols, indices, names, rows):
        """The labels of the given rows (None without labels)."""
        import numpy as np

        if self._labels is None:
            return None
        if self._labels == "source":
            return self._source_labels[np.asarray([indices[r] for r in rows], dtype=np.int64)]
        if callable(self._labels):
            return np.array([self._labels(names[r]) for r in rows], dtype=np.int64)
        column = cols[self._labels]
        return np.array([_label_value(column[r]) for r in rows], dtype=np.int64)

    def __call__(self, batch):
        import numpy as np

        cols = _columns(batch)
        n = len(next(iter(cols.values()))) if cols else 0
        datas, names, keys = self._rows(cols, n)
        indices, failed = self._indices(cols, keys, names, n)
        for r, d in enumerate(datas):
            if d is None and r not in failed and not self._aug.dataset_size:
                failed[r] = _errors.InvalidArgumentError(
                    f"{names[r] or f'row {r}'}: no encoded image in the row (columns {sorted(cols)}) and no "
                    f"source to read it from", _c.FF_EINVAL)
        run = [r for r in range(n) if r not in failed]
        images, errors = self._aug.run(self.epoch, [datas[r] for r in run], [indices[r] for r in run],
                                       [names[r] for r in run])
        failed.update((run[k], e) for k, e in errors)
        if failed and self.on_error == "raise":
            raise failed[min(failed)]
        if failed:
            messages = [str(failed[r]) for r in sorted(failed)]
            for m in messages:
                _log.warning("fusionflow.ray.Augment: skipped %s", m)
            self.skipped_count += len(messages)
            if self._skipped is not None:
                self._skipped._add(messages)
            images = images[[k for k, r in enumerate(run) if r not in failed]]
        ok = [r for r in range(n) if r not in failed]
        out = {"image": images, "index": np.array([indices[r] for r in ok], dtype=np.int64)}
        labels = self._label_column(cols, indices, names, ok)
        if labels is not None:
            out["label"] = labels
        for c in self._keep:
            out[c] = np.asarray(cols[c])[ok]
        return out
