"""The face a Loader shows where scripts touch a torch DataLoader: its keyword
names, and ``loader.dataset``, ``loader.sampler`` and ``loader.batch_sampler``.

The dataset view answers as torchvision's ImageFolder does (``samples``,
``targets``, ``classes``, ``dataset[i]``) and pickles as the few settings that
fix a sample's pixels, so that it can go to DataLoader worker processes; the
sampler views list the indices the loader hands out and forward ``set_epoch``
to it. The views read the loader's C handle and never drive its iteration.
"""
import os
import warnings
import weakref

from . import _fusionflow as _c
from ._output import converter

# DataLoader arguments that would change the batches, refused (unless given DataLoader's
# default, _REFUSED_DEFAULTS), and what to do instead.
_REFUSED_DEFAULTS = {"sampler": None, "batch_sampler": None, "collate_fn": None, "pin_memory_device": "",
                     "in_order": True}
_REFUSED = {
    "sampler": "the order is shuffle/seed/permutation, sharded by rank and world_size",
    "batch_sampler": "batches are batch_size consecutive samples of the epoch's order",
    "collate_fn": "batches come assembled as (images, labels) tensors",
    "pin_memory_device": "batches are prepared where device= and the library place them",
    "in_order": "batches always come in order",
    "dataset": "pass the data as source (a folder, a list file, imagefolder: or list:)",
}
# DataLoader arguments that leave the batches as they are here: accepted, with one
# warning per loader naming those given a value other than DataLoader's default.
_IGNORED = {
    "worker_init_fn": (None, "the workers are C threads that run no Python"),
    "generator": (None, "the order and every draw come from seed= (permutation='torch': "
                        "torch.randperm's order)"),
    "timeout": (0, "next() waits for its batch (Ctrl-C interrupts it)"),
    "multiprocessing_context": (None, "the workers are C threads, not processes"),
}


def dataloader_names(num_threads, num_workers, prefetch, prefetch_factor, extra):
    """DataLoader's names mapped to ours: num_workers -> num_threads, prefetch_factor
    (batches per worker) -> prefetch (batches in all); the names in _IGNORED accepted
    (one warning for those set), the rest refused saying why."""
    ignored = []
    for name, value in extra.items():
        if name in _IGNORED:
            default, why = _IGNORED[name]
            if value is not default and value != default:
                ignored.append(f"{name}= ({why})")
            continue
        if name in _REFUSED_DEFAULTS and value is _REFUSED_DEFAULTS[name] or (
                isinstance(value, str) and value == _REFUSED_DEFAULTS.get(name)):
            continue  # DataLoader's default: what fusionflow does anyway
        why = _REFUSED.get(name)
        if why is None:
            raise TypeError(f"fusionflow.Loader() got an unexpected keyword argument {name!r}")
        raise TypeError(f"fusionflow.Loader: DataLoader's {name}= is not supported: {why}")
    if ignored:
        warnings.warn("fusionflow.Loader: these DataLoader arguments change nothing here: " + "; ".join(ignored),
                      stacklevel=4)
    if num_workers is not None:
        if num_threads is not None:
            raise TypeError("fusionflow.Loader: give num_threads or its DataLoader name num_workers, not both")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"fusionflow.Loader: num_workers must be an int >= 0 (got {num_workers!r})")
        num_threads = num_workers or None  # 0 (load in the main process) has no meaning here: all cores
    if prefetch_factor is not None:
        if isinstance(prefetch_factor, bool) or not isinstance(prefetch_factor, int) or prefetch_factor < 1:
            raise ValueError(f"fusionflow.Loader: prefetch_factor must be an int >= 1 (got {prefetch_factor!r})")
        prefetch = prefetch_factor * (num_threads or len(os.sched_getaffinity(0)))
    return num_threads, prefetch


# The open_loader arguments that fix a sample's pixels and label, kept by a SourceDataset.
PIXEL_ARGS = ("source", "pipeline", "seed", "max_image_pixels", "max_member_bytes", "strict_decode", "allow_empty",
              "output_dtype", "memory_format", "semantics")


def _gone():
    return None


_views = weakref.WeakSet()


def _before_fork():
    """A forked process (a DataLoader worker) cannot ask its copy of a loader: each view
    notes the loader's epoch first."""
    for view in list(_views):
        view._note_epoch()


os.register_at_fork(before=_before_fork)


class SourceDataset:
    """A Loader's data set as torchvision's ``ImageFolder`` shows it (``loader.dataset``).

    Attributes (built on first use; a folder source's equal ImageFolder's):
        root (str): the folder (imagefolder), or the source text (list:, tar:).
        samples, imgs (list of (str, int)): ``(path, label)`` per sample in dataset
            order; a ``tar:`` sample's path is ``"SHARD:MEMBER"``.
        targets (list of int): the labels.
        classes (list of str or None), class_to_idx (dict or None): the class
            folders, for a folder source; None for list and tar sources.

    ``len(dataset)`` is the number of samples; ``dataset[i]`` is ``(image, label)``:
    what the loader's pipeline makes of sample i in the loader's current epoch (the
    bytes its place in a batch of that epoch holds; no batch stage, the first copy
    under repeated augmentation), ``image`` a ``(3, H, W)`` float tensor or
    ``(H, W, 3)`` uint8 one as a batch's rows (a list per view with views), in the
    loader's output kind, ``label`` an int. Raises IndexError past the end,
    ValueError for a streamed ``tar:`` source (no random access) and the loader's
    errors for an unreadable or corrupt file.

    Picklable: it pickles as its source, pipeline, seed and the settings that fix
    the pixels, plus the epoch it was at, so a DataLoader with worker processes can
    load from it (``Subset(loader.dataset, ...)``); in another process (a pickled
    copy or a forked worker) it opens a small loader of its own (one thread) on first
    use.
    """

    def __init__(self, owner, spec, output):
        self._owner = owner  # a callable giving the Loader (or None once it is gone)
        self._owner_pid = os.getpid()
        self._handle = None  # this view's own small loader, in another process
        self._pid = None     # the process _handle was opened in
        self._spec = dict(spec)
        self._output = output
        self._epoch = 0  # the epoch when the loader cannot be asked
        self._samples = None
        self._classes = None
        self._convert = None
        _views.add(self)

    # -- pickling --------------------------------------------------------------------

    def __getstate__(self):
        return {"spec": self._spec, "output": self._output, "epoch": self._current_epoch()}

    def __setstate__(self, state):
        self.__init__(_gone, state["spec"], state["output"])
        self._epoch = state["epoch"]

    # -- the C handle ------------------------------------------------------------------

    def _loader(self):
        loader = self._owner() if os.getpid() == self._owner_pid else None
        return None if loader is None or loader.closed else loader

    def _note_epoch(self):
        try:
            loader = self._loader()
            if loader is not None:
                self._epoch = loader.epoch
        except Exception:  # another thread consuming it: keep the last epoch seen
            pass

    def _current_epoch(self):
        self._note_epoch()
        return self._epoch

    def _c(self):
        loader = self._loader()
        if loader is not None:
            return loader._open()
        if self._handle is None or self._pid != os.getpid():
            self._pid = os.getpid()
            mix = "mixup_cutmix" in self._spec["pipeline"]  # timm's Mixup needs even batches
            self._handle = _c.open_loader(batch_size=2 if mix else 1, drop_last=int(mix), shuffle=0,
                                          num_threads=1, prefetch=1, rank=0, world_size=1, device="cpu",
                                          pin_memory=0, **self._spec)
        return self._handle

    # -- ImageFolder's attributes -------------------------------------------------------

    @property
    def root(self):
        source = self._spec["source"]
        return source[len("imagefolder:"):] if source.startswith("imagefolder:") else source

    @property
    def samples(self):
        if self._samples is None:
            c = self._c()
            self._samples = [c.sample_info(i) for i in range(c.dataset_size)]
        return self._samples

    imgs = samples

    @property
    def targets(self):
        return [label for _, label in self.samples]

    @property
    def classes(self):
        if self._classes is None:
            self._classes = self._c().classes or ()
        return list(self._classes) if self._classes else None

    @property
    def class_to_idx(self):
        classes = self.classes
        return None if classes is None else {name: i for i, name in enumerate(classes)}

    def __len__(self):
        return self._c().dataset_size

    def __getitem__(self, i):
        c = self._c()
        n = c.dataset_size
        i = i.__index__()
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"fusionflow: sample {i} is past the {n} samples of the data set")
        if self._convert is None:
            self._convert = converter(self._output, "fusionflow.Loader.dataset")
        images, label = c.sample_images(i, self._current_epoch())
        if isinstance(images, list):
            return [self._convert(v) for v in images], label
        return self._convert(images), label

    def __repr__(self):
        return f"fusionflow.SourceDataset(root={self.root!r}, {len(self)} samples)"


class Sampler:
    """``loader.sampler``: the loader's order as a torch sampler shows it.

    ``len(sampler)`` is the samples one epoch hands this rank (DistributedSampler's
    ``num_samples``: padded, or cut with ``sampler_drop_last``; RepeatAugSampler's
    with repeats); iterating gives their dataset indices in hand-out order for the
    loader's current epoch; ``set_epoch(e)`` is ``loader.set_epoch(e)`` (calling it
    again with the same epoch before iterating changes nothing, so it may be called
    through ``loader.sampler`` and ``loader.batch_sampler.sampler`` alike).
    ``shuffle``, ``seed``, ``rank``, ``num_replicas`` and ``drop_last`` are the
    loader's (DistributedSampler's names).
    """

    def __init__(self, loader):
        self._loader = loader

    def set_epoch(self, epoch):
        self._loader.set_epoch(epoch)

    @property
    def epoch(self):
        return self._loader.epoch

    shuffle = property(lambda self: self._loader.shuffle)
    seed = property(lambda self: self._loader.seed)
    rank = property(lambda self: self._loader.rank)
    num_replicas = property(lambda self: self._loader.world_size)
    drop_last = property(lambda self: self._loader.sampler_drop_last)

    def __len__(self):
        return self._loader.num_samples

    def __iter__(self):
        loader = self._loader
        return iter(loader._open().epoch_order(loader.epoch))


class BatchSampler:
    """``loader.batch_sampler``: the order cut into batches, as torch's BatchSampler:
    ``sampler`` (the same object as ``loader.sampler``), ``batch_size``, ``drop_last``;
    ``len`` is ``len(loader)``; iterating gives a list of dataset indices per batch
    (before any ``on_error="skip"`` removes a failed sample)."""

    def __init__(self, loader, sampler):
        self._loader = loader
        self.sampler = sampler

    batch_size = property(lambda self: self._loader.batch_size)
    drop_last = property(lambda self: self._loader.drop_last)

    def __len__(self):
        return len(self._loader)

    def __iter__(self):
        order, size = list(self.sampler), self.batch_size
        for b in range(len(self)):
            yield order[b * size:(b + 1) * size]


class DataLoaderFace:
    """What fusionflow.Loader answers where a script reads a DataLoader's ``dataset``,
    ``sampler`` and ``batch_sampler`` (Loader derives from it); the views read the
    loader's C handle (``_open()``) and its settings."""

    @property
    def dataset(self):
        """The data set, as a DataLoader's ``dataset``: for a folder, list or tar source a
        :class:`fusionflow.SourceDataset` (torchvision ImageFolder's ``samples``, ``targets``,
        ``classes``, ``class_to_idx``; ``dataset[i]`` is ``(image, label)`` as the pipeline makes
        sample i in the current epoch; picklable, for DataLoader worker processes); for a
        Python dataset source, that dataset itself."""
        if self._user_dataset is not None:
            return self._user_dataset
        if self._pixel_spec is None:
            return self.source
        return self._dataloader_views()[0]

    @property
    def sampler(self):
        """The order as a torch sampler shows it (:class:`fusionflow.Sampler`): ``len`` is
        DistributedSampler's ``num_samples`` for this rank, iterating gives the dataset
        indices the current epoch hands out, ``set_epoch(e)`` is ``loader.set_epoch(e)``."""
        return self._dataloader_views()[1]

    @property
    def batch_sampler(self):
        """The order cut into batches (:class:`fusionflow.BatchSampler`): ``sampler`` (the
        same object as ``loader.sampler``), ``batch_size``, ``drop_last``, ``len`` (batches per
        epoch), and a list of dataset indices per batch when iterated."""
        return self._dataloader_views()[2]

    def _dataloader_views(self):
        if self._views is None:
            self._open()
            dataset = None if self._pixel_spec is None else SourceDataset(weakref.ref(self), self._pixel_spec,
                                                                          self.output)
            sampler = Sampler(self)
            self._views = (dataset, sampler, BatchSampler(self, sampler))
        return self._views
