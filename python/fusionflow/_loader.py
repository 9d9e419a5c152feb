"""fusionflow.Loader: the Python face of the C loader (see fusionflow.h).

The Loader object owns one C loader (_fusionflow.CLoader) and what a training
script reaches through it: iteration, epochs and resuming, statistics, closing,
and the DataLoader-shaped views (_dataloader.py). Its arguments are converted to
the library's values in _args.py, the library checks them; the iterator and the
hand-out's torch streams are in _batches.py.
"""

import atexit
import collections
import inspect
import json
import operator
import os
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Mapping
from typing import Any, Optional, Union

from . import _errors
from . import _fusionflow as _c
from ._args import is_path, normalize_source, open_args
from ._batches import EpochIterator, empty_cache_due, fence_stream
from ._dataloader import PIXEL_ARGS, DataLoaderFace
from ._dataset_source import DatasetFetcher
from ._output import converter
from ._progress import log_open_progress
from ._recipes import recipe_pipeline
from ._stats import LoaderStats

__all__ = ["Loader", "BatchInfo"]

BatchInfo = collections.namedtuple("BatchInfo", ["epoch", "index", "sample_indices"])
BatchInfo.__doc__ = """Where the last batch handed out comes from.

epoch (int), index (int: the batch's position in its epoch, from 0) and
sample_indices (list of int: the dataset index of each of its samples, in
batch order; the dataset index is the sample's position in the source's
order, e.g. torchvision ImageFolder's ``samples`` list)."""


def _torch_distributed():
    """(rank, world_size) of torch.distributed when the script imported it and
    initialized a process group (as DistributedSampler reads them), else (None, None)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except (RuntimeError, ValueError):
        pass
    return None, None


_open_loaders = weakref.WeakSet()
_open_lock = threading.Lock()


@atexit.register
def _close_all():
    """Interpreter exit: stop every loader's threads before Python finalizes."""
    with _open_lock:
        loaders = list(_open_loaders)
    for loader in loaders:
        try:
            loader.close()
        except Exception:  # pragma: no cover - best effort at exit
            pass
    _c._interpreter_exiting()  # a loader still closing in the background must not wait for the GIL now


class Loader(DataLoaderFace, LoaderStats):
    """Batches of augmented images from a folder or a list of files, prepared on a
    pool of C threads and handed out without copying.

    ``for images, labels in loader`` runs the rest of the current epoch, in
    order; the batches of an epoch are bit-identical for a given seed whatever
    ``num_threads`` is.

    Args:
        ``source`` and ``pipeline`` may be given by position, the rest by keyword.

    Source (what is read, and what a bad sample does):
        source (str, os.PathLike or a dataset): ``"imagefolder:DIR"`` (one sub-folder per
            class, as torchvision's ImageFolder: files with its extensions .jpg
            .jpeg .png .ppm .bmp .pgm .tif .tiff .webp in any case; other files
            are left out and counted in ``stats()["source_ignored_files"]``;
            ``classes`` and ``class_to_idx`` as ImageFolder's), ``"list:FILE"`` (lines
            ``path<TAB>label``), ``"tar:PATTERN"`` (WebDataset shards:
            ``"tar:/data/train-{000000..001023}.tar"``, ``"tar:@shards.txt"``,
            ``"tar:http://host/train-{000..099}.tar"``, ``"tar:pipe:curl -s URL"``;
            members ``KEY.jpg|jpeg|png|webp`` with ``KEY.cls``; local
            uncompressed shards are read by offset, the others streamed), or a
            plain path: a folder is taken as ``imagefolder:``, a ``.tsv``/``.txt``
            file as ``list:``. Or any
            indexable with a length whose items hold an encoded image (JPEG,
            PNG, WebP, TIFF, PBM/PGM/PPM or BMP bytes) and an int label: a list
            of ``(bytes, label)``, a torch Dataset returning such pairs, a
            Hugging Face ``datasets.Dataset`` whose image column is cast to
            ``Image(decode=False)`` (rows ``{"image": {"bytes": ...}, "label": ...}``;
            a row with only a ``path`` is read from that file). The worker threads
            ask for a batch's items together, under one hold of the GIL (through
            ``__getitems__`` when the dataset has it, as Hugging Face's and torch's
            do), and decode without it. An item that cannot be had (its
            ``__getitem__`` raises, or it is not bytes and a label) fails that
            sample as ``dataset[INDEX]: the reason``, under ``on_error``. The
            batches equal those of an imagefolder of the same images, for the
            same seed.
        image_key, label_key (str or None): for items that are mappings, the
            image and label entries; None looks for ``"image"`` (or ``"img"``,
            ``"jpg"``, ``"jpeg"``, ``"png"``, ``"webp"``) and ``"label"`` (or
            ``"labels"``, ``"cls"``, ``"target"``).
        allow_empty (bool): accept class folders without images (torchvision's
            ImageFolder ``allow_empty``); by default they raise EmptySourceError.
        max_image_pixels (int or None): bounds every image of a sample: the
            decoded image (refused from its header before decoding) and each image
            the pipeline makes (refused before it is allocated), with
            DecodeError naming the file; None or 0 = no limit; below 2**64.
            Default 89478485, Pillow's.
        max_member_bytes ("auto", int or None): the encoded bytes one sample may
            have, a tar member (local or streamed) or an image file: a larger one
            fails (DecodeError naming the file and the limit) before its bytes are
            read. "auto" (default): 8 bytes a pixel of max_image_pixels plus
            16 MiB (732605096 for its default); None or 0: no limit. The other limits,
            streaming's too, are in docs/limits.md.
        strict_decode (bool): corrupt JPEG data that libjpeg repairs raises
            DecodeError instead of a warning counted in ``stats()`` (Pillow
            decodes such files silently; the default, False, decodes them too).
        on_error (str): ``"raise"``: an unreadable or corrupt image raises
            :class:`fusionflow.DecodeError` (or OSError) for the batch that holds
            it, naming the file; iteration may go on with the next batch.
            ``"skip"``: the sample is left out, counted and listed in ``stats()``.
            ``"replace"``: the sample is replaced by the next sample of the
            epoch's order that succeeds (its own label and random draws),
            counted and listed in ``stats()``: every batch keeps its size and
            every rank its batch count (DDP, torch.compile, timm).
        shuffle_buffer (int): streamed ``tar:`` sources (``http://``, ``https://``,
            ``pipe:`` or compressed shards): the shuffle buffer of each rank's
            stream in samples, below 2**40 (default 1000; 0: only the shard order is
            shuffled). The order is a pure function of (seed, epoch, rank,
            world_size); every rank gets the same number of samples. Other
            sources ignore it.

    Sampling (the order of an epoch, and this process's share):
        batch_size (int, required): samples per batch, 1 to 2**30. The last batch of an epoch
            is shorter unless ``drop_last`` (and batches are shorter by the
            samples skipped under ``on_error="skip"``).
        shuffle (bool): a seeded permutation per epoch (DistributedSampler's default, True).
        drop_last (bool): drop the last batch of an epoch when it is short
            (DataLoader's drop_last).
        sampler_drop_last (bool): cut the epoch's order to a multiple of
            world_size instead of padding it by repeating its start
            (DistributedSampler's drop_last). The common torch setup, padded
            shards and no short batch, is ``drop_last=True`` alone.
        permutation (str): how ``shuffle`` orders an epoch: ``"philox"`` (ours,
            the default) or ``"torch"``: the order of ``torch.randperm`` after
            ``manual_seed(seed + epoch)``, i.e. exactly DistributedSampler's
            (computed here: torch is not needed), so a script moving from
            DistributedSampler keeps its sample order.
        seed (int): base seed of the order and of every random draw, 0 <= seed < 2**64.
        rank (int or None), world_size (int or None): this process's shard,
            as torch.utils.data.DistributedSampler (padding the epoch by
            repeating samples unless drop_last). None: as DistributedSampler,
            torch.distributed's rank and world size when it is initialized
            (``torch.multiprocessing.spawn`` scripts), else ``$RANK`` and
            ``$WORLD_SIZE`` (set by torchrun), else 0 and 1.
        repeated_augmentations (int): N >= 1 orders the epoch as timm's
            RepeatAugSampler (DeiT's RASampler) with num_repeats=N: each sample
            N times in a row before the split across ranks, num_selected_samples
            per rank, each copy with its own augmentation draws; 0:
            DistributedSampler's order; None (default): 0, or the recipe's
            setting with recipe=. With ``permutation="torch"`` and seed 0
            the index lists equal RepeatAugSampler's.

    Pipeline:
        pipeline (str): the pipeline text, e.g. ``"decode | random_resized_crop(size=224)
            | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"``.
            Ending in ``normalize`` or ``to_dtype`` gives float32 NCHW images,
            otherwise uint8 NHWC.
        recipe (str): a training-recipe preset instead of a pipeline ("deit",
            "torchvision-v2", "dino", "simclr", "resnet-strikes-back-a1": see
            :func:`fusionflow.recipes` and ``fusionflow recipe NAME``): its pipeline,
            and its repeated_augmentations unless given; PipelineError naming the
            ops it needs when this build lacks them.
        num_classes (int): with recipe=, the classes of its mixup_cutmix, 1 to
            16777216 (default ImageNet's 1000).
        semantics (str): whose arithmetic the ops follow: ``"v1"`` (default,
            ``torchvision.transforms``) or ``"v2"`` (``torchvision.transforms.v2``: color,
            contrast, sharpness, autocontrast, the bilinear warps' fill blend and the
            policies' solarize thresholds differ by one level; v2's native uint8 resize is
            not reproduced -- see fusionflow.h, ff_semantics). The same seed and semantics
            give the same batches; the random draws do not depend on it.

    Threads and device (who prepares the samples):
        num_threads (int or None): worker threads, at most 2**20; None or 0 = the CPUs this process may use.
        prefetch (int): batches prepared ahead, 1 to 2**20. At most ``prefetch + 1``
            batches can be alive at once (see below).
        device (str): where the CPU pool's deficit goes when it cannot keep up
            with the training loop (FusionFlow's cooperative scheduler): ``"cpu"``
            (no offload), ``"auto"`` (torch's current CUDA device when CUDA is
            initialised, else GPU ``$LOCAL_RANK`` modulo the visible GPUs; the CPU,
            quietly, when none opens), ``"cuda:N"``, or ``"emu:N"`` (the host-emulated device, for
            tests). Batches are bit-identical whatever the device takes. A named
            device that cannot be opened raises
            :class:`fusionflow.DeviceUnavailableError` (a ValueError).
        device_memory_limit_bytes (int): the most device memory the loader may
            hold; 0 = the free memory less a headroom for training. Free means
            free on the device (``torch.cuda.mem_get_info()[0]``): memory torch's
            caching allocator holds unused is torch's, not the loader's.
        device_decode (str): whether samples sent to the device may be decoded there
            (placement ``device``): ``"auto"`` (default: on for a CUDA device with nvJPEG),
            ``"off"`` or ``"on"``. nvJPEG's pixels are not libjpeg-turbo's, so with it on
            the pixels of a sample depend on where it was decoded (see fusionflow.h,
            ff_config.device_decode).
        deterministic (bool): bit-identical batches and exact resume whatever the load:
            device decode off whatever ``device_decode`` says.
        release_torch_cache (bool): when the device memory budget refused work
            (``stats()["device_budget_refusals"]`` grew) and torch has initialised
            CUDA, call ``torch.cuda.empty_cache()`` before the next batch (at most
            every 10 s), so that what torch caches unused becomes free for the
            loader. Costs the trainer fresh ``cudaMalloc`` calls for memory it
            needs again; default False (the loader then takes only free memory).
            See docs/device-memory.md.
        remote (fusionflow.ray.Workers or None): remote CPU workers on a Ray cluster that
            take what this process's threads (and device) leave of the training loop's
            demand, only for batches a measured round trip ahead; their samples are
            bit-identical to local ones. The Loader starts its own pool at open and
            stops it at close (docs/remote.md). Not with views or random_erasing
            (InvalidArgumentError) nor streamed sources.

    Output (what a batch is, and where):
        output (str): what batches become: ``"torch"`` (torch.Tensor via
            torch.from_dlpack), ``"numpy"`` (numpy.ndarray via numpy.from_dlpack),
            ``"dlpack"`` (:class:`fusionflow.Tensor`, any DLPack consumer), or
            ``"auto"`` (torch if it is installed, else NumPy, else
            :class:`fusionflow.Tensor`). ``"torch"`` or ``"numpy"`` without that
            package installed raise ImportError naming it.
        output_device (str): where the images are handed out: ``"cpu"`` (default),
            ``"cuda:N"`` (GPU memory: ``torch.from_dlpack`` gives a CUDA tensor whose
            current stream waits for the batch's upload, and the batch's memory is
            reused only after the work queued on that stream when the tensor dies),
            or ``"emu:N"`` (the emulated device; host memory). Same bytes as ``"cpu"``.
            A pipeline ending in ``mixup_cutmix(...)`` is mixed on the device batch
            (the same bytes); its soft labels stay CPU tensors, as labels do.
        dtype (str, torch.dtype or None): the images' element type: None (default)
            float32 when the pipeline ends in normalize/to_dtype, else uint8;
            ``"float32"``, ``"bfloat16"``, ``"float16"`` (need such a pipeline: the
            float32 value rounded to nearest even, as ``tensor.to(dtype)``) or
            ``"uint8"`` (one without it). NumPy output cannot hold bfloat16.
        memory_format (str, torch.memory_format or None): None (default) NCHW for
            float types and (N, H, W, 3) for uint8; ``"contiguous_format"`` NCHW
            planes; ``"channels_last"`` NHWC memory seen as (N, 3, H, W), as
            torch's ``channels_last``. With an ``output_device`` and a float type the
            host's samples go up as uint8 and are converted on the device.

    DataLoader's names:
        pin_memory (bool or None): host batches in pinned (page-locked) memory,
            so that ``images.cuda(non_blocking=True)`` is truly asynchronous
            (DataLoader's pin_memory). None (default): when ``device`` is a CUDA
            GPU; True: pinned by the loader's GPU (with ``device="cpu"`` or
            ``"auto"``, the GPU ``"auto"`` picks) and, as DataLoader does, host
            memory with one warning on a machine without one; False: never.
        num_workers, prefetch_factor, persistent_workers: DataLoader's names,
            accepted: ``num_workers`` is ``num_threads`` (0, DataLoader's "in the
            main process", means all cores here); ``prefetch_factor`` counts
            batches per worker, so ``prefetch = prefetch_factor * threads``;
            ``persistent_workers`` changes nothing (the threads always live as
            long as the loader). ``worker_init_fn``, ``generator``, ``timeout``
            and ``multiprocessing_context`` leave the batches as they are here
            (C threads run no Python; the order and draws come from ``seed``):
            accepted, with one warning naming those given a value. DataLoader's
            arguments that would change the batches (``sampler``,
            ``batch_sampler``, ``collate_fn``, ...) raise TypeError saying what to
            use instead, unless given DataLoader's default (``sampler=None``).

    Each batch is ``(images, labels)``:
        images: ``(N, 3, H, W)`` float32 (pipelines ending in normalize/to_dtype)
            or ``(N, H, W, 3)`` uint8, C-contiguous, on the CPU.
        labels: ``(N,)`` int64 class indices; with a pipeline ending in the batch
            stage ``mixup_cutmix(...)``, the mixed soft targets instead:
            ``(N, num_classes)`` float32, as timm's Mixup returns them (on the CPU,
            also with an ``output_device``).
    With views (``decode || 2 x OPS || 8 x OPS``, see fusionflow.h) images is a
    list of per-view tensors, in view order (DINO's 2 global + 8 local crops),
    prepared on the CPU (``device="cpu"``) and, with an ``output_device``, each
    in the device's memory.

    Zero copy and lifetime: the tensors are views of the loader's ring of
    ``prefetch + 1`` batch buffers. A buffer goes back to the ring when both
    the images and the labels of its batch (and everything made from them
    without copying) are dropped -- even after the loader is closed. Holding
    more than ``prefetch + 1`` batches at once is not possible: the next
    ``next()`` raises :class:`fusionflow.InvalidArgumentError` (a ValueError)
    asking you to drop earlier batches or keep copies (``images.clone()``,
    ``numpy.array(images)``). A training loop that drops each batch before
    fetching the next (the usual ``for`` loop) holds one.

    Copies to the GPU: host batches in pinned memory (``pin_memory``) can be
    copied asynchronously, ``images.cuda(non_blocking=True)``, which only queues
    the copy on torch's current stream. So that the loader does not refill a
    batch's memory before such a copy has read it, every ``next`` (and
    ``close()``) records an event on torch's current stream once torch has
    initialised CUDA (ff_loader_fence), and a batch dropped before it is refilled
    only after that event has completed. A copy made on another stream must be
    joined to the current one (``torch.cuda.current_stream().wait_stream(side)``)
    before the next iteration; see docs/gpu-copies.md.

    Raises (from the constructor): :class:`fusionflow.PipelineError` (bad pipeline
    text, with the column), ValueError / :class:`fusionflow.InvalidArgumentError`
    (bad argument), FileNotFoundError / OSError (source missing or unreadable),
    :class:`fusionflow.EmptySourceError` (no samples), MemoryError;
    KeyboardInterrupt (Ctrl-C while opening a streamed source, below).

    Opening a streamed ``tar:`` source reads every shard once, each with up to
    ``1 + $FF_STREAM_RETRIES`` attempts, so a slow or stalled server keeps the
    constructor waiting, for minutes. Once it has waited 2 s the ``"fusionflow"``
    logger (:mod:`logging`) says what for -- ``opening, 32 s: shard 3 of 100, URL,
    backing off before attempt 2 of 4 (the last failed: ...)`` -- then for each wait
    (a shard's read, a backoff) that lasts half a second, and at least every 10 s: at
    INFO while a shard's first read goes on (``logging.basicConfig(level=logging.INFO)``
    shows these), at WARNING once a read has failed. Each record's ``open_progress``
    attribute is a dict of ``shard`` (its URL, ``pipe:COMMAND`` or path),
    ``shard_index`` (from 0), ``num_shards``, ``attempt``, ``max_attempts``,
    ``backing_off``, ``last_error`` ("" on a first attempt), ``shard_s``, ``elapsed_s``
    (seconds) and ``due`` (True: this call's line is said). Ctrl-C gives the open up
    within a fraction of a second and the constructor raises KeyboardInterrupt; so does
    any exception a signal handler raises (signals reach only the main thread), e.g. a
    deadline through ``signal.alarm``.

    Closing: ``close()``, ``with Loader(...) as loader:``, garbage collection
    and interpreter exit all stop the threads. ``break`` leaves the loader
    where it is (the next ``for`` goes on from there); Ctrl-C interrupts a
    wait for a batch at once (KeyboardInterrupt) and loses no batch, and the
    open of a streamed source likewise.
    """

    def __init__(
        self,
        source: Union[str, "os.PathLike[str]", Any],
        pipeline: Optional[str] = None,
        *positional: Any,  # none is taken: it only lets the error name the keyword (signature: *, below)
        # source
        image_key: Optional[str] = None,
        label_key: Optional[str] = None,
        allow_empty: bool = False,
        max_image_pixels: Optional[int] = _c.DEFAULT_MAX_IMAGE_PIXELS,
        max_member_bytes: Union[str, int, None] = "auto",
        strict_decode: bool = False,
        on_error: str = "raise",
        shuffle_buffer: int = 1000,
        # sampling
        batch_size: int = None,  # required (the signature below says so): None names a missing one here
        shuffle: bool = True,
        drop_last: bool = False,
        sampler_drop_last: bool = False,
        permutation: str = "philox",
        seed: int = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        repeated_augmentations: Optional[int] = None,
        # pipeline
        recipe: Optional[str] = None,
        num_classes: Optional[int] = None,
        semantics: str = "v1",
        # threads and device
        num_threads: Optional[int] = None,
        prefetch: int = 2,
        device: str = "auto",
        device_memory_limit_bytes: int = 0,
        device_decode: str = "auto",
        deterministic: bool = False,
        release_torch_cache: bool = False,
        remote: Optional[Any] = None,
        # output
        output: str = "auto",
        output_device: str = "cpu",
        dtype: Union[str, Any, None] = None,
        memory_format: Union[str, Any, None] = None,
        # DataLoader's names
        pin_memory: Optional[bool] = None,
        num_workers: Optional[int] = None,
        prefetch_factor: Optional[int] = None,
        persistent_workers: Optional[bool] = None,
        **dataloader_kwargs: Any,
    ) -> None:
        self._c = None
        self._classes = None
        if positional:
            raise TypeError(f"fusionflow.Loader takes source and pipeline by position and every other argument by "
                            f"keyword: got {len(positional)} more positional argument(s); for DataLoader's third, "
                            f"write batch_size={positional[0]!r}")
        if batch_size is None:
            raise TypeError("fusionflow.Loader() missing 1 required keyword-only argument: 'batch_size'")
        settings = dict(locals())
        del settings["self"], settings["source"], settings["pipeline"], settings["positional"]
        if recipe is not None:
            if pipeline is not None:
                raise TypeError("fusionflow.Loader: give a pipeline or a recipe, not both")
            pipeline, repeats = recipe_pipeline(recipe, num_classes)
            if repeated_augmentations is None:
                settings["repeated_augmentations"] = repeats
        elif pipeline is None:
            raise TypeError("fusionflow.Loader: a pipeline (or recipe=) is required")
        elif num_classes is not None:
            raise TypeError("fusionflow.Loader: num_classes= goes with recipe= (a pipeline says it in mixup_cutmix)")
        if settings["repeated_augmentations"] is None:
            settings["repeated_augmentations"] = 0
        fetcher, dataset_size = None, 0
        if not is_path(source) and not (hasattr(source, "__getitem__") and hasattr(source, "__len__")):
            raise TypeError(f"fusionflow.Loader: source must be a path or an indexable dataset with a "
                            f"length (got {type(source).__name__})")
        args = open_args("dataset" if not is_path(source) else normalize_source(source), pipeline, settings)
        if is_path(source):
            self.source = args["source"]
        else:
            dataset_size = len(source)
            fetcher = DatasetFetcher(source, image_key, label_key)
            self.source = source
        args.update(dataset=fetcher, dataset_size=dataset_size)
        self._fetcher = fetcher
        self.pipeline = pipeline
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.sampler_drop_last = bool(sampler_drop_last)
        self.permutation = permutation
        self.seed = seed
        self.semantics = semantics
        self.prefetch = args["prefetch"]
        self.on_error = on_error
        self.device = device
        self.pin_memory = pin_memory
        self.output_device = output_device
        self.output = output
        if rank is None and world_size is None:  # DistributedSampler's: the process group, when there is one
            rank, world_size = _torch_distributed()
            args.update(rank=-1 if rank is None else rank, world_size=-1 if world_size is None else world_size)
        self.last_batch = None
        self._held_epoch = None
        self._iterations = 0
        self._side_streams = {}  # device index -> torch.cuda.Stream (copy_stream)
        self.release_torch_cache = bool(release_torch_cache)
        self._cache_state = {"refusals": 0, "at": None}  # empty_cache_due
        self._views = None
        self._user_dataset = None  # fusionflow.timm: the dataset create_loader was given
        self._has_mix, self._mix_on = None, True
        self._convert = converter(output, "fusionflow.Loader")
        limit = args["max_image_pixels"]
        self._remote = queue = None
        if remote is not None:
            if not hasattr(remote, "_open"):
                raise TypeError(f"fusionflow.Loader: remote must be a fusionflow.ray.Workers (got "
                                f"{type(remote).__name__})")
            queue, self._remote = remote._open(
                {"pipeline": pipeline, "seed": seed, "semantics": semantics, "strict_decode": bool(strict_decode),
                 "max_image_pixels": limit, "source": None if fetcher else self.source}, path_source=not fetcher)
            self._remote.started_ev.wait()
            if self._remote.error is not None:
                raise self._remote.error
        try:
            self._c = _c.open_loader(open_progress=log_open_progress, remote=queue, **args)
        except BaseException as e:
            if self._remote is not None:
                self._remote.stop()
            if isinstance(e, _errors.DeviceError):
                raise _errors.DeviceUnavailableError(f"fusionflow.Loader(device={device!r}): {e}", e.status) from None
            raise
        if self._remote is not None:
            self._remote.attached_ev.set()
        self.rank, self.world_size = self._c.rank, self._c.world_size  # $RANK, $WORLD_SIZE as the library read them
        self._pixel_spec = None if fetcher else {name: args[name] for name in PIXEL_ARGS}
        self._classes = self._c.classes
        with _open_lock:
            _open_loaders.add(self)
        if pin_memory and not self._c.stats()["host_memory_pinned"]:
            warnings.warn("fusionflow.Loader: pin_memory=True, but no GPU could pin the batches: they are in "
                          "ordinary host memory (as DataLoader without an accelerator)", stacklevel=2)

    # -- sizes ---------------------------------------------------------------------------

    def __len__(self):
        """Batches in one epoch for this rank (the last may be short unless drop_last)."""
        return self._open().num_batches

    @property
    def num_samples(self):
        """Samples in one epoch for this rank (DistributedSampler's num_samples, padding included)."""
        return self._open().num_samples

    @property
    def dataset_size(self):
        """Samples in the source, all ranks together."""
        return self._open().dataset_size

    @property
    def classes(self):
        """The class names, sorted, label i being ``classes[i]`` (torchvision's
        ``ImageFolder.classes``) for a folder source; None for sources whose
        labels have no names (list files, Python datasets). Stays readable
        after close()."""
        return None if self._classes is None else list(self._classes)

    @property
    def class_to_idx(self):
        """``{class name: label}`` (torchvision's ``ImageFolder.class_to_idx``) for a
        folder source; None for the others."""
        return None if self._classes is None else {name: i for i, name in enumerate(self._classes)}

    @property
    def closed(self):
        """True once close() ran."""
        return self._c is None or self._c.closed

    @property
    def mixup_enabled(self):
        """Whether the batch stage (``mixup_cutmix``) mixes: False without one. Setting
        False (timm's train.py does at ``--mixup-off-epoch``, on its loader) turns the mixing
        off from the next batch: images unmixed, targets the labels' smoothed one-hot rows,
        as timm's Mixup with ``mixup_enabled = False``; True turns it back on (ValueError
        without a batch stage)."""
        if self._has_mix is None:
            try:
                self._open().mix_plan(0, 0)
                self._has_mix = True
            except ValueError:
                self._has_mix = False
        return self._has_mix and self._mix_on

    @mixup_enabled.setter
    def mixup_enabled(self, enabled):
        if not enabled and not self.mixup_enabled and not self._has_mix:
            return  # nothing to turn off, as timm's loader without a Mixup collate
        self._open().set_mix_enabled(bool(enabled))
        self._mix_on = bool(enabled)

    # -- iteration -----------------------------------------------------------------------

    def __iter__(self):
        """An iterator over the rest of the current epoch: ``(images, labels)`` per batch.

        The epoch is the one ``set_epoch`` chose, or the one after the last
        epoch iterated to its end (epochs advance by themselves), starting at
        the batch ``load_state_dict`` restored or where a ``break`` left it.
        Starting a new iteration ends the previous iterator of this loader.

        Raises (from ``next``): :class:`fusionflow.DecodeError` / OSError for a
        bad image under ``on_error="raise"`` (the next ``next`` goes on with the
        following batch), :class:`fusionflow.InvalidArgumentError` when
        ``prefetch + 1`` batches are still referenced, KeyboardInterrupt; and
        what a Python dataset's ``__getitem__`` raised that is not an Exception
        (KeyboardInterrupt, SystemExit), whatever ``on_error`` says.
        """
        self._open()
        self._iterations += 1
        return EpochIterator(self, self._iterations)

    def _release_torch_cache(self, core):
        """release_torch_cache=True: when the device memory budget said no since
        the last batch (ff_stats.device_budget_refusals grew) and torch has
        initialised CUDA, torch.cuda.empty_cache() hands what torch caches unused
        to the device, where the loader's budget finds it at the next batch; at
        most once every EMPTY_CACHE_EVERY_S seconds (_batches.py). Never by default: the
        budget counts only memory the device has free, and what torch caches
        is torch's."""
        if not self.release_torch_cache:
            return
        refusals = core.budget_refusals()
        if empty_cache_due(sys.modules.get("torch"), refusals, self._cache_state, time.monotonic()):
            sys.modules["torch"].cuda.empty_cache()

    def _next_batch(self, iteration):
        if iteration != self._iterations:
            raise RuntimeError("fusionflow: another iteration over this loader started; this iterator is done")
        core = self._open()
        self._resume_fetcher()
        self._release_torch_cache(core)
        try:
            answer = core.next(fence_stream(core, self._side_streams))
        except BaseException:
            self._raise_pending_exit()
            raise
        if self._fetcher is not None and self._fetcher.pending_exit is not None:
            del answer  # the batch goes back now, not with the traceback of what the dataset raised
            self._raise_pending_exit()
        if answer is None:
            return None
        images, labels, indices, epoch, index = answer
        del answer
        self._held_epoch = None
        self.last_batch = BatchInfo(epoch, index, indices)
        convert = self._convert
        if isinstance(images, list):  # views: one tensor per view
            return [convert(v) for v in images], convert(labels)
        return convert(images), convert(labels)

    def _raise_pending_exit(self):
        """Raises, once, what a dataset raised that is not an Exception (see DatasetFetcher)."""
        fetcher = self._fetcher
        if fetcher is not None and fetcher.pending_exit is not None:
            e, fetcher.pending_exit = fetcher.pending_exit, None
            fetcher.halted = True  # nothing is asked of the dataset until the consumer calls again
            raise e

    def _resume_fetcher(self):
        """At the consumer's first call after the dataset's exception was raised: the samples
        asked of the dataset since it raised failed without asking it (DatasetFetcher), so the
        batches prepared meanwhile are made again (a seek away from the position and back) and
        no sample is lost to on_error="skip"."""
        fetcher, c = self._fetcher, self._c
        if fetcher is None or not fetcher.halted:
            return
        fetcher.halted = False
        if c is None or c.num_batches < 1:
            return
        epoch, batch = c.position()
        c.seek(epoch, batch + 1 if batch < c.num_batches else batch - 1)
        c.seek(epoch, batch)

    # -- epochs and resuming ---------------------------------------------------------------

    def set_epoch(self, epoch):
        """Selects the epoch the next iteration runs, from its first batch (as
        DistributedSampler.set_epoch: the order and every random draw depend on
        (seed, epoch)). Setting the epoch that comes next anyway keeps the
        batches already prepared. Until the next batch is handed out, setting
        the epoch the last ``set_epoch`` or ``load_state_dict`` chose again
        changes nothing: a restored mid-epoch position is kept (so the usual
        ``for epoch in range(start, n): loader.set_epoch(epoch)`` resumes
        mid-epoch), and ``loader.set_epoch(e)`` and ``loader.sampler.set_epoch(e)``
        may both be called (PyTorch Lightning calls the sampler's).

        Args:
            epoch (int): in [0, 2**64) (the library's uint64_t).
        Raises: ValueError for a negative epoch or one from 2**64 on.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, int) or not 0 <= epoch < 1 << 64:
            raise ValueError(f"fusionflow: set_epoch: epoch must be a non-negative int below 2**64 (got {epoch!r})")
        c = self._open()
        self._resume_fetcher()
        if self._held_epoch == epoch:
            return
        c.set_epoch(epoch)
        self._held_epoch = epoch

    def plan(self, index, epoch=None):
        """What the loader draws for sample ``index`` (its place in the data
        set, as the batches' sample indices give it) in ``epoch`` (default: the
        epoch the next batch comes from), without decoding it: a dict with
        "path", "label", "semantics" ("v1" or "v2"), "image" (format, width, height), "decode" (the region
        decoded, in full-image pixels, its DCT scale, the decoded size and the
        region's exact box in it) and "steps" (with views: "views", a dict per
        view with its "region" and "steps"), each {"op": name, ...}: crop
        boxes, resizes, the flips (one not drawn: ``"applied": False``, nothing to do), every augmentation op with "arg" (as
        torchvision's _apply_op calls it), "magnitude" and "sign", AugMix's
        weights. The keys are those of ff_loader_plan (fusionflow.h).

        Raises: ValueError for a bad index or epoch (each in [0, 2**64)); the loader's errors for
        an unreadable file.
        """
        for name, v in (("index", index), ("epoch", epoch)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 64):
                raise ValueError(f"fusionflow: plan: {name} must be a non-negative int below 2**64 (got {v!r})")
        if epoch is None:
            epoch = self.epoch
        try:
            text = self._open().plan(index, epoch)
        finally:
            self._raise_pending_exit()
        return json.loads(text)

    def mix_plan(self, batch, epoch=None):
        """What the batch stage (``mixup_cutmix`` at the end of the pipeline)
        draws for batch ``batch`` of ``epoch`` (default: the epoch the next batch
        comes from): a dict with "convention", "mode", "batch_size", "on_value",
        "off_value", "draws" (each with "applied", "cutmix", "lam_draw", "lam" and,
        for a CutMix box, "center", "cut", "corner", "box" as [y0, y1, x0, x1]) and
        "partners". The keys are those of ff_loader_mix_plan (fusionflow.h).

        Raises: ValueError for a bad batch or epoch, or a pipeline without the stage.
        """
        for name, v in (("batch", batch), ("epoch", epoch)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"fusionflow: mix_plan: {name} must be a non-negative int (got {v!r})")
        if epoch is None:
            epoch = self.epoch
        return json.loads(self._open().mix_plan(epoch, batch))

    @property
    def epoch(self):
        """The epoch the next batch comes from."""
        return self._open().position()[0]

    def state_dict(self):
        """The position to resume from: a dict of ints, safe to pickle or torch.save.

        Keys: ``epoch`` and ``batch`` (the batch the next iteration hands out:
        taken inside the loop body after batch k, it resumes at k + 1), and the
        settings that must match on load (``seed``, ``batch_size``, ``shuffle``,
        ``drop_last``, ``sampler_drop_last``, ``permutation``, ``semantics``, ``world_size``,
        ``dataset_size``). The rank is not
        included: every rank is at the same position, so one rank's state
        serves all.
        """
        c = self._open()
        epoch, batch = c.position()
        return {
            "version": 1,
            "epoch": epoch,
            "batch": batch,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "shuffle": self.shuffle,
            "drop_last": self.drop_last,
            "sampler_drop_last": self.sampler_drop_last,
            "permutation": self.permutation,
            "semantics": self.semantics,
            "world_size": self.world_size,
            "dataset_size": c.dataset_size,
        }

    def load_state_dict(self, state):
        """Continues at the position of ``state`` (from ``state_dict``): the batches
        that follow are bit-identical to those the saved run would have handed out.

        As for the other keys, a state without ``version`` is taken as this
        version's: ``{"epoch": e, "batch": b}`` seeks to batch b of epoch e.

        Raises: ValueError when the state has a ``version`` other than the int
        1, was saved with a different seed, batch size, shuffle, drop_last,
        sampler_drop_last, permutation, semantics, world size or data set
        size, or names an epoch or batch that is not an int, an epoch outside
        [0, 2**64) or a batch past the epoch's end.
        """
        c = self._open()
        mine = self.state_dict()
        version = state.get("version", mine["version"]) if isinstance(state, Mapping) else None
        if isinstance(version, bool) or not isinstance(version, int) or version != mine["version"]:
            raise ValueError(f"fusionflow: load_state_dict: expected a state from state_dict() with version "
                             f"{mine['version']} (got version {version!r})")
        for key in ("seed", "batch_size", "shuffle", "drop_last", "sampler_drop_last", "permutation", "semantics",
                    "world_size", "dataset_size"):
            if key in state and state[key] != mine[key]:
                raise ValueError(f"fusionflow: load_state_dict: the state was saved with {key}={state[key]!r}, "
                                 f"this loader has {key}={mine[key]!r}")
        try:
            if any(isinstance(state[k], bool) for k in ("epoch", "batch")):
                raise TypeError
            epoch, batch = operator.index(state["epoch"]), operator.index(state["batch"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("fusionflow: load_state_dict: expected a dict from state_dict() with 'epoch' and "
                             f"'batch' (got {state!r:.200})") from None
        if not 0 <= epoch < 1 << 64 or not 0 <= batch <= c.num_batches:
            raise ValueError(f"fusionflow: load_state_dict: position (epoch {epoch}, batch {batch}) is outside "
                             f"epochs [0, 2**64) and the {c.num_batches} batches of an epoch")
        self._resume_fetcher()
        c.seek(epoch, batch)
        self._held_epoch = epoch

    # -- closing -------------------------------------------------------------------------

    def close(self):
        """Stops and joins the worker threads and frees the loader. Idempotent.

        Batches already handed out stay valid until they are dropped. After an
        interrupted wait (Ctrl-C) the close finishes in the background as soon
        as the batch being waited for is ready.
        """
        c, self._c = self._c, None
        remote, self._remote = getattr(self, "_remote", None), None
        if remote is not None:  # its dispatcher first: no microbatch goes out or comes back after this
            remote.stop()
        if c is not None:
            c.close(fence_stream(c, self._side_streams))
        with _open_lock:
            _open_loaders.discard(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        c = getattr(self, "_c", None)
        if c is not None:
            c.close()

    def _open(self):
        if self._c is None:
            raise ValueError("fusionflow: the loader is closed")
        return self._c

    def __repr__(self):
        state = "closed" if self.closed else f"{len(self)} batches/epoch"
        source = repr(self.source) if is_path(self.source) else f"<{type(self.source).__name__} dataset>"
        return (f"fusionflow.Loader(source={source}, batch_size={self.batch_size}, shuffle={self.shuffle}, "
                f"drop_last={self.drop_last}, seed={self.seed}, rank={self.rank}, world_size={self.world_size}, "
                f"{state})")


def _shown_signature(init):
    """What help(Loader) and inspect show: "*," where __init__ has *positional (it takes none), and
    batch_size required (its None default is there only to name it when it is missing)."""
    params = [p.replace(default=inspect.Parameter.empty) if p.name == "batch_size" else p
              for p in inspect.signature(init).parameters.values() if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    return inspect.signature(init).replace(parameters=params)


Loader.__init__.__signature__ = _shown_signature(Loader.__init__)
