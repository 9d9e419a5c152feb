"""fusionflow.Loader: the Python face of the C loader (see fusionflow.h)."""

import atexit
import collections
import json
import logging
import operator
import os
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Mapping

from . import _errors
from . import _fusionflow as _c
from ._dataset_source import DatasetFetcher
from ._dataloader import PIXEL_ARGS, BatchSampler, Sampler, SourceDataset, dataloader_names
from ._output import OUTPUTS as _OUTPUTS
from ._output import converter as _converter

__all__ = ["Loader", "BatchInfo", "augment_image"]

BatchInfo = collections.namedtuple("BatchInfo", ["epoch", "index", "sample_indices"])
BatchInfo.__doc__ = """Where the last batch handed out comes from.

epoch (int), index (int: the batch's position in its epoch, from 0) and
sample_indices (list of int: the dataset index of each of its samples, in
batch order; the dataset index is the sample's position in the source's
order, e.g. torchvision ImageFolder's ``samples`` list)."""


def _normalize_source(source):
    """The source as text; the library resolves its kind (a bare folder or .tsv/.txt file too)."""
    text = os.fspath(source)
    return os.fsdecode(text) if isinstance(text, bytes) else text


def _is_path(source):
    return isinstance(source, (str, bytes, os.PathLike))


_DEVICE_DECODE = {"auto": 0, "off": 1, "on": 2}  # ff_device_decode
_DTYPES = {None: 0, "float32": 1, "bfloat16": 2, "float16": 3, "uint8": 4}  # ff_output_dtype
_MEMORY_FORMATS = {None: 0, "contiguous_format": 1, "channels_last": 2}  # ff_memory_format
_SEMANTICS = {"v1": 0, "v2": 1}  # ff_semantics


def _semantics(where, semantics):
    if semantics not in _SEMANTICS:
        raise ValueError(f"fusionflow.{where}: semantics must be 'v1' or 'v2' (got {semantics!r})")
    return _SEMANTICS[semantics]

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


def _env_int(name, fallback):
    value = os.environ.get(name, "")
    try:
        return int(value) if value else fallback
    except ValueError:
        return fallback


_log = logging.getLogger("fusionflow")


_EMPTY_CACHE_EVERY_S = 10.0


def _empty_cache_due(torch, refusals, state, now):
    """Whether to release torch's cache now (Loader.release_torch_cache): the
    budget refused work since the last look (``refusals``, the count, grew past
    state["refusals"]), torch is imported and has initialised CUDA, and the last
    release (state["at"]) is _EMPTY_CACHE_EVERY_S old. Updates state."""
    grew = refusals > state["refusals"]
    state["refusals"] = refusals
    if not grew or torch is None or not torch.cuda.is_initialized():
        return False
    if state["at"] is not None and now - state["at"] < _EMPTY_CACHE_EVERY_S:
        return False
    state["at"] = now
    return True


def _copy_stream(torch, index, side_streams):
    """The cudaStream_t (an int) on GPU ``index`` that every copy queued so far on
    torch's current stream is ordered before: the current stream itself when it is
    on that device, else a side stream of ``index`` (kept in ``side_streams``) made
    to wait for it, since an event is recorded on a stream of its own device.
    None when torch has not initialised CUDA (no copy can have been queued); CUDA
    is never initialised here."""
    cuda = torch.cuda
    if not cuda.is_initialized():
        return None
    current = cuda.current_stream()
    if current.device.index == index:
        return current.cuda_stream
    side = side_streams.get(index)
    if side is None:
        side = side_streams[index] = cuda.Stream(device=index)
    side.wait_stream(current)
    return side.cuda_stream


def _log_open_progress(p):
    """Says through the "fusionflow" logger what the open of a streamed source waits for
    (the C extension calls it with each ff_open_progress as a dict, about every 100 ms),
    whenever the open says a line is due (``due``: once opening has taken 2 s, then for
    each wait that lasts half a second, and at least every 10 s). INFO while a shard's
    first read goes on, WARNING once one has failed (retries, backoffs); the record's
    ``open_progress`` is the dict."""
    if p["due"]:
        failed = f" (the last failed: {p['last_error']})" if p["last_error"] else ""
        so_far = "" if p["backing_off"] else f": {_human_bytes(p['shard_bytes'])}, {p['shard_samples']} samples so far"
        _log.log(logging.WARNING if p["attempt"] > 1 else logging.INFO,
                 "fusionflow.Loader: opening, %.0f s: shard %d of %d, %s, %s attempt %d of %d%s%s", p["elapsed_s"],
                 p["shard_index"] + 1, p["num_shards"], p["shard"],
                 "backing off before" if p["backing_off"] else "reading,", p["attempt"], p["max_attempts"], so_far,
                 failed, extra={"open_progress": p})


def _human_bytes(n):
    """812 bytes, 1.2 kB, 3.4 MB (powers of 1000), as the CLI's progress lines say them."""
    if n < 1000:
        return f"{n} bytes"
    v, units = n / 1000, ["kB", "MB", "GB", "TB"]
    while v >= 1000 and len(units) > 1:
        v, units = v / 1000, units[1:]
    return f"{v:.1f} {units[0]}"


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


_ON_ERROR = {"raise": 0, "skip": 1, "replace": 2}  # ff_on_error


def recipes():
    """The training-recipe presets: a dict name -> {"source", "pipeline",
    "repeated_augmentations", "needs", "available"} (see ``fusionflow recipe --list``).
    A recipe is available when this build has every op its pipeline uses."""
    return {name: {"source": source, "pipeline": pipeline, "repeated_augmentations": repeats, "needs": needs,
                   "available": why is None}
            for name, source, pipeline, repeats, needs, why in _c.recipes()}


def recipe_pipeline(name, num_classes=None):
    """(pipeline, repeated_augmentations) of recipe ``name``, with its mixup_cutmix's
    num_classes set (the recipes' 1000 is ImageNet's; None keeps it), by the library's
    ff_recipe_pipeline, as ``fusionflow bench --recipe NAME --num-classes N``. Raises
    ValueError for an unknown recipe, a num_classes that is not an int (or numpy
    integer) in [1, 16777216] (mixup_cutmix's bound), or a
    num_classes for a recipe without mixup_cutmix (no batch stage);
    :class:`fusionflow.PipelineError` naming the ops a recipe needs that this build lacks."""
    for rname, _, pipeline, repeats, _, why in _c.recipes():
        if rname != name:
            continue
        if why is not None:
            raise _errors.PipelineError(why, -2)
        if num_classes is not None:
            try:  # ints and what stands for one (__index__: numpy's integers), not bools
                n = None if isinstance(num_classes, bool) else operator.index(num_classes)
            except TypeError:
                n = None
            if n is None or not 1 <= n <= _c.MAX_NUM_CLASSES:
                raise ValueError(f"fusionflow: num_classes must be an int in [1, {_c.MAX_NUM_CLASSES}] (mixup_cutmix's "
                                 f"bound; got {num_classes!r})")
            pipeline = _c.recipe_pipeline(name, n)  # ValueError: no batch stage
        return pipeline, repeats
    names = ", ".join(r[0] for r in _c.recipes())
    raise ValueError(f"fusionflow: unknown recipe {name!r} (recipes: {names})")


class Loader:
    """Batches of augmented images from a folder or a list of files, prepared on a
    pool of C threads and handed out without copying.

    ``for images, labels in loader`` runs the rest of the current epoch, in
    order; the batches of an epoch are bit-identical for a given seed whatever
    ``num_threads`` is.

    Args:
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
        pipeline (str): the pipeline text, e.g. ``"decode | random_resized_crop(size=224)
            | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"``.
            Ending in ``normalize`` or ``to_dtype`` gives float32 NCHW images,
            otherwise uint8 NHWC.
        batch_size (int): samples per batch, >= 1. The last batch of an epoch
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
        shuffle_buffer (int): streamed ``tar:`` sources (``http://``, ``https://``,
            ``pipe:`` or compressed shards): the shuffle buffer of each rank's
            stream in samples (default 1000; 0: only the shard order is
            shuffled). The order is a pure function of (seed, epoch, rank,
            world_size); every rank gets the same number of samples. Other
            sources ignore it.
        num_threads (int or None): worker threads; None or 0 = the CPUs this process may use.
        remote (fusionflow.ray.Workers or None): remote CPU workers on a Ray cluster that
            take what this process's threads (and device) leave of the training loop's
            demand, only for batches a measured round trip ahead; their samples are
            bit-identical to local ones. The Loader starts its own pool at open and
            stops it at close (docs/remote.md). Not with views or random_erasing
            (InvalidArgumentError) nor streamed sources.
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
        release_torch_cache (bool): when the device memory budget refused work
            (``stats()["device_budget_refusals"]`` grew) and torch has initialised
            CUDA, call ``torch.cuda.empty_cache()`` before the next batch (at most
            every 10 s), so that what torch caches unused becomes free for the
            loader. Costs the trainer fresh ``cudaMalloc`` calls for memory it
            needs again; default False (the loader then takes only free memory).
            See docs/device-memory.md.
        pin_memory (bool or None): host batches in pinned (page-locked) memory,
            so that ``images.cuda(non_blocking=True)`` is truly asynchronous
            (DataLoader's pin_memory). None (default): when ``device`` is a CUDA
            GPU; True: pinned by the loader's GPU (with ``device="cpu"`` or
            ``"auto"``, the GPU ``"auto"`` picks) and, as DataLoader does, host
            memory with one warning on a machine without one; False: never.
        output_device (str): where the images are handed out: ``"cpu"`` (default),
            ``"cuda:N"`` (GPU memory: ``torch.from_dlpack`` gives a CUDA tensor whose
            current stream waits for the batch's upload, and the batch's memory is
            reused only after the work queued on that stream when the tensor dies),
            or ``"emu:N"`` (the emulated device; host memory). Same bytes as ``"cpu"``.
            A pipeline ending in ``mixup_cutmix(...)`` is mixed on the device batch
            (the same bytes); its soft labels stay CPU tensors, as labels do.
        device_decode (str): whether samples sent to the device may be decoded there
            (placement ``device``): ``"auto"`` (default: on for a CUDA device with nvJPEG),
            ``"off"`` or ``"on"``. nvJPEG's pixels are not libjpeg-turbo's, so with it on
            the pixels of a sample depend on where it was decoded (see fusionflow.h,
            ff_config.device_decode).
        deterministic (bool): bit-identical batches and exact resume whatever the load:
            device decode off whatever ``device_decode`` says.
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
        semantics (str): whose arithmetic the ops follow: ``"v1"`` (default,
            ``torchvision.transforms``) or ``"v2"`` (``torchvision.transforms.v2``: color,
            contrast, sharpness, autocontrast, the bilinear warps' fill blend and the
            policies' solarize thresholds differ by one level; v2's native uint8 resize is
            not reproduced -- see fusionflow.h, ff_semantics). The same seed and semantics
            give the same batches; the random draws do not depend on it.
        repeated_augmentations (int): N >= 1 orders the epoch as timm's
            RepeatAugSampler (DeiT's RASampler) with num_repeats=N: each sample
            N times in a row before the split across ranks, num_selected_samples
            per rank, each copy with its own augmentation draws; 0:
            DistributedSampler's order; None (default): 0, or the recipe's
            setting with recipe=. With ``permutation="torch"`` and seed 0
            the index lists equal RepeatAugSampler's.
        prefetch (int): batches prepared ahead, >= 1. At most ``prefetch + 1``
            batches can be alive at once (see below).
        recipe (str): a training-recipe preset instead of a pipeline ("deit",
            "torchvision-v2", "dino", "simclr", "resnet-strikes-back-a1": see
            :func:`fusionflow.recipes` and ``fusionflow recipe NAME``): its pipeline,
            and its repeated_augmentations unless given; PipelineError naming the
            ops it needs when this build lacks them.
        num_classes (int): with recipe=, the classes of its mixup_cutmix, 1 to
            16777216 (default ImageNet's 1000).
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
        on_error (str): ``"raise"``: an unreadable or corrupt image raises
            :class:`fusionflow.DecodeError` (or OSError) for the batch that holds
            it, naming the file; iteration may go on with the next batch.
            ``"skip"``: the sample is left out, counted and listed in ``stats()``.
            ``"replace"``: the sample is replaced by the next sample of the
            epoch's order that succeeds (its own label and random draws),
            counted and listed in ``stats()``: every batch keeps its size and
            every rank its batch count (DDP, torch.compile, timm).
        strict_decode (bool): corrupt JPEG data that libjpeg repairs raises
            DecodeError instead of a warning counted in ``stats()`` (Pillow
            decodes such files silently; the default, False, decodes them too).
        allow_empty (bool): accept class folders without images (torchvision's
            ImageFolder ``allow_empty``); by default they raise EmptySourceError.
        rank (int or None), world_size (int or None): this process's shard,
            as torch.utils.data.DistributedSampler (padding the epoch by
            repeating samples unless drop_last). None: as DistributedSampler,
            torch.distributed's rank and world size when it is initialized
            (``torch.multiprocessing.spawn`` scripts), else ``$RANK`` and
            ``$WORLD_SIZE`` (set by torchrun), else 0 and 1.
        output (str): what batches become: ``"torch"`` (torch.Tensor via
            torch.from_dlpack), ``"numpy"`` (numpy.ndarray via numpy.from_dlpack),
            ``"dlpack"`` (:class:`fusionflow.Tensor`, any DLPack consumer), or
            ``"auto"`` (torch if it is installed, else NumPy, else
            :class:`fusionflow.Tensor`). ``"torch"`` or ``"numpy"`` without that
            package installed raise ImportError naming it.
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

    def __init__(self, source, pipeline=None, batch_size=None, shuffle=True, drop_last=False, seed=0, num_threads=None,
                 device="auto", prefetch=2, on_error="raise", rank=None, world_size=None, output="auto",
                 max_image_pixels=_c.DEFAULT_MAX_IMAGE_PIXELS, device_memory_limit_bytes=0, strict_decode=False,
                 allow_empty=False, sampler_drop_last=False, permutation="philox", pin_memory=None,
                 output_device="cpu", device_decode="auto", deterministic=False, dtype=None,
                 memory_format=None, semantics="v1", repeated_augmentations=None, shuffle_buffer=1000, num_workers=None,
                 prefetch_factor=None, persistent_workers=None, recipe=None, num_classes=None,
                 image_key=None, label_key=None, release_torch_cache=False, max_member_bytes="auto", remote=None,
                 **dataloader_kwargs):
        self._c = None
        self._classes = None
        if batch_size is None:
            raise TypeError("fusionflow.Loader: batch_size is required")
        if recipe is not None:
            if pipeline is not None:
                raise TypeError("fusionflow.Loader: give a pipeline or a recipe, not both")
            pipeline, repeats = recipe_pipeline(recipe, num_classes)
            if repeated_augmentations is None:
                repeated_augmentations = repeats
        elif pipeline is None:
            raise TypeError("fusionflow.Loader: a pipeline (or recipe=) is required")
        elif num_classes is not None:
            raise TypeError("fusionflow.Loader: num_classes= goes with recipe= (a pipeline says it in mixup_cutmix)")
        if repeated_augmentations is None:
            repeated_augmentations = 0
        num_threads, prefetch = dataloader_names(num_threads, num_workers, prefetch, prefetch_factor,
                                                 dataloader_kwargs)
        dtype_name = None if dtype is None else str(dtype).replace("torch.", "")
        format_name = None if memory_format is None else str(memory_format).replace("torch.", "")
        if dtype_name not in _DTYPES:
            raise ValueError(f"fusionflow.Loader: dtype must be None, 'float32', 'bfloat16', 'float16' or 'uint8' "
                             f"(got {dtype!r})")
        if format_name not in _MEMORY_FORMATS:
            raise ValueError(f"fusionflow.Loader: memory_format must be None, 'contiguous_format' or "
                             f"'channels_last' (got {memory_format!r})")
        if dtype_name == "bfloat16" and output == "numpy":
            raise ValueError("fusionflow.Loader: NumPy has no bfloat16: use output=\"torch\" or \"dlpack\"")
        if device_decode not in _DEVICE_DECODE:
            raise ValueError(f"fusionflow.Loader: device_decode must be 'auto', 'off' or 'on' (got {device_decode!r})")
        semantics_value = _semantics("Loader", semantics)
        if permutation not in ("philox", "torch"):
            raise ValueError(f"fusionflow.Loader: permutation must be 'philox' or 'torch' (got {permutation!r})")
        if not isinstance(device, str):
            raise TypeError(f"fusionflow.Loader: device must be a str (got {type(device).__name__})")
        if isinstance(device_memory_limit_bytes, bool) or not isinstance(device_memory_limit_bytes, int) \
                or not 0 <= device_memory_limit_bytes < 1 << 64:
            raise ValueError(f"fusionflow.Loader: device_memory_limit_bytes must be an int in [0, 2**64) "
                             f"(got {device_memory_limit_bytes!r})")
        if on_error not in _ON_ERROR:
            raise ValueError(f"fusionflow.Loader: on_error must be 'raise', 'skip' or 'replace' (got {on_error!r})")
        if not isinstance(output_device, str):
            raise TypeError(f"fusionflow.Loader: output_device must be a str (got {type(output_device).__name__})")
        if output == "numpy" and output_device.startswith("cuda"):
            raise ValueError("fusionflow.Loader: output=\"numpy\" cannot hold GPU batches: use output=\"torch\" "
                             "or \"dlpack\" with output_device=" + repr(output_device))
        if pin_memory not in (None, True, False):
            raise TypeError(f"fusionflow.Loader: pin_memory must be None, True or False (got {pin_memory!r})")
        if output not in _OUTPUTS:
            raise ValueError(f"fusionflow.Loader: output must be one of {', '.join(map(repr, _OUTPUTS))} "
                             f"(got {output!r})")
        if isinstance(repeated_augmentations, bool) or not isinstance(repeated_augmentations, int) \
                or not 0 <= repeated_augmentations <= 4096:
            raise ValueError(f"fusionflow.Loader: repeated_augmentations must be an int in [0, 4096] "
                             f"(got {repeated_augmentations!r})")
        if not isinstance(pipeline, str):
            raise TypeError(f"fusionflow.Loader: pipeline must be a str (got {type(pipeline).__name__})")
        for name, value in (("batch_size", batch_size), ("prefetch", prefetch), ("seed", seed)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"fusionflow.Loader: {name} must be an int (got {type(value).__name__})")
        if not 0 <= seed < 1 << 64:
            raise ValueError(f"fusionflow.Loader: seed must be in [0, 2**64) (got {seed})")
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)):
            raise TypeError(f"fusionflow.Loader: num_threads must be an int or None (got {num_threads!r})")
        for name, value in (("rank", rank), ("world_size", world_size)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"fusionflow.Loader: {name} must be a non-negative int or None (got {value!r})")
        if max_member_bytes == "auto":
            member_limit = (1 << 64) - 1  # FF_MEMBER_BYTES_AUTO
        elif max_member_bytes is None or (isinstance(max_member_bytes, int) and not isinstance(max_member_bytes, bool)
                                          and 0 <= max_member_bytes < (1 << 64) - 1):
            member_limit = max_member_bytes or 0
        else:
            raise ValueError(f"fusionflow.Loader: max_member_bytes must be 'auto', None or an int in [0, 2**64 - 1) "
                             f"(got {max_member_bytes!r})")
        limit = 0 if max_image_pixels is None else int(max_image_pixels)
        if not 0 <= limit < 1 << 64:
            raise ValueError(f"fusionflow.Loader: max_image_pixels must be in [0, 2**64) or None "
                             f"(got {max_image_pixels})")
        if isinstance(shuffle_buffer, bool) or not isinstance(shuffle_buffer, int) or not 0 <= shuffle_buffer < 1 << 40:
            raise ValueError(f"fusionflow.Loader: shuffle_buffer must be an int in [0, 2**40) (got {shuffle_buffer!r})")
        if batch_size > 1 << 30 or prefetch > 1 << 20 or (num_threads or 0) > 1 << 20:
            raise ValueError("fusionflow.Loader: batch_size, prefetch or num_threads is out of range")

        fetcher, dataset_size = None, 0
        if _is_path(source):
            self.source = _normalize_source(source)
        else:
            if not (hasattr(source, "__getitem__") and hasattr(source, "__len__")):
                raise TypeError(f"fusionflow.Loader: source must be a path or an indexable dataset with a "
                                f"length (got {type(source).__name__})")
            dataset_size = len(source)
            fetcher = DatasetFetcher(source, image_key, label_key)
            self.source = source
        self._fetcher = fetcher
        self.pipeline = pipeline
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.sampler_drop_last = bool(sampler_drop_last)
        self.permutation = permutation
        self.seed = seed
        self.semantics = semantics
        self.prefetch = prefetch
        self.on_error = on_error
        self.device = device
        self.pin_memory = pin_memory
        self.output_device = output_device
        self.output = output
        if rank is None and world_size is None:
            rank, world_size = _torch_distributed()
        self.rank = rank if rank is not None else _env_int("RANK", 0)
        self.world_size = world_size if world_size is not None else _env_int("WORLD_SIZE", 1)
        self.last_batch = None
        self._held_epoch = None
        self._iterations = 0
        self._side_streams = {}  # device index -> torch.cuda.Stream (_copy_stream)
        self.release_torch_cache = bool(release_torch_cache)
        self._cache_state = {"refusals": 0, "at": None}  # _empty_cache_due
        self._views = None
        self._user_dataset = None  # fusionflow.timm: the dataset create_loader was given
        self._has_mix, self._mix_on = None, True
        self._convert = _converter(output, "fusionflow.Loader")
        args = dict(source="dataset" if fetcher else self.source, pipeline=pipeline, batch_size=batch_size,
                    shuffle=int(self.shuffle), drop_last=int(self.drop_last), seed=seed, num_threads=num_threads or 0,
                    prefetch=prefetch, rank=-1 if rank is None else rank,
                    world_size=-1 if world_size is None else world_size, on_error=_ON_ERROR[on_error],
                    max_image_pixels=limit, device=device, device_memory_limit_bytes=device_memory_limit_bytes,
                    strict_decode=bool(strict_decode), allow_empty=bool(allow_empty),
                    sampler_drop_last=self.sampler_drop_last, torch_permutation=permutation == "torch",
                    pin_memory=-1 if pin_memory is None else 2 if pin_memory else 0, output_device=output_device,
                    device_decode=_DEVICE_DECODE[device_decode], deterministic=bool(deterministic),
                    output_dtype=_DTYPES[dtype_name], memory_format=_MEMORY_FORMATS[format_name],
                    semantics=semantics_value, repeated_augmentations=repeated_augmentations,
                    shuffle_buffer=shuffle_buffer, dataset=fetcher, dataset_size=dataset_size,
                    max_member_bytes=member_limit)
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
            self._c = _c.open_loader(open_progress=_log_open_progress, remote=queue, **args)
        except BaseException as e:
            if self._remote is not None:
                self._remote.stop()
            if isinstance(e, _errors.DeviceError):
                raise _errors.DeviceUnavailableError(f"fusionflow.Loader(device={device!r}): {e}", e.status) from None
            raise
        if self._remote is not None:
            self._remote.attached_ev.set()
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

    # -- where scripts touch a DataLoader (_dataloader.py) --------------------------------

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
        return _EpochIterator(self, self._iterations)

    def _release_torch_cache(self, core):
        """release_torch_cache=True: when the device memory budget said no since
        the last batch (ff_stats.device_budget_refusals grew) and torch has
        initialised CUDA, torch.cuda.empty_cache() hands what torch caches unused
        to the device, where the loader's budget finds it at the next batch; at
        most once every _EMPTY_CACHE_EVERY_S seconds. Never by default: the
        budget counts only memory the device has free, and what torch caches
        is torch's."""
        if not self.release_torch_cache:
            return
        refusals = core.budget_refusals()
        if _empty_cache_due(sys.modules.get("torch"), refusals, self._cache_state, time.monotonic()):
            sys.modules["torch"].cuda.empty_cache()

    def _fence_stream(self, core):
        """The stream to fence (ff_loader_fence) before the next batch: where
        the trainer's copies of host batches are queued. For batches pinned by
        a CUDA device, torch's current stream (a side stream of that device
        joined to it when the current device is another); while torch is not
        imported or has not initialised CUDA, no copy of torch's can be queued
        yet and the device's default stream (0) stands in, so that fencing is
        on from the first batch (torch is never imported, nor its CUDA state
        initialised, here). Pinned by the emulator: its default stream (0).
        Ordinary memory: None (nothing to fence)."""
        dev = core.pinned_device
        if not dev.startswith(("cuda:", "emu:")):
            return None
        torch = sys.modules.get("torch") if dev.startswith("cuda:") else None
        stream = None if torch is None else _copy_stream(torch, int(dev[5:]), self._side_streams)
        return 0 if stream is None else stream

    def _next_batch(self, iteration):
        if iteration != self._iterations:
            raise RuntimeError("fusionflow: another iteration over this loader started; this iterator is done")
        core = self._open()
        self._resume_fetcher()
        self._release_torch_cache(core)
        try:
            answer = core.next(self._fence_stream(core))
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

    # -- statistics ----------------------------------------------------------------------

    def stats(self):
        """Counters since the loader opened, as a dict.

        Keys (times in nanoseconds summed over worker threads, except wait_ns):
            batches, samples (int): handed out.
            read_ns, decode_ns, ops_ns (int): reading files, decoding, running the ops.
            wait_ns (int): wall time the consumer waited for batches.
            read_bytes (int): encoded bytes read.
            skipped (int): samples skipped under on_error="skip";
            replaced (int): samples replaced under on_error="replace";
            skipped_samples (list of str): "path: reason" of each distinct failure, skipped or replaced
                (a file failing in several epochs is listed once; at most 1000).
            warnings (int): samples decoded despite corrupt data libjpeg repaired;
            warning_samples (list of str): "path: damage", each listed once (at most 1000).
            num_threads (int): worker threads.
            device (str): the device in use ("cpu", "emu:0", "cuda:0 (NVIDIA H200)").
            device_samples, device_fallbacks (int): samples the device prepared; samples
                meant for it that the CPU prepared after a refusal or a device error.
            device_ns (int): device time of the microbatches.
            device_budget_refusals (int): times the device memory budget said no
                (a batch it admitted no device sample of, or a microbatch refused
                for memory); see release_torch_cache.
            fences (int), fence_wait_ns (int): events recorded after the trainer's
                copies of host batches (one per next() when the batches are pinned),
                and the time a worker waited for one (see "Copies to the GPU").
            device_pool_limit_bytes, device_pool_peak_bytes (int): the device memory
                budget now, and the most the loader held.
            offload_share (float): the scheduler's current device share, 0..1.
            device_decoder (str): what decodes device-placed samples ("libjpeg-turbo",
                "nvjpeg-like", "nvjpeg-hardware", "nvjpeg-hybrid") or "none";
                device_decoder_note (str): why it is "none" (also when its failures
                turned it off during the run).
            decoders (str): which decoders decoded the samples handed out:
                "libjpeg-turbo" (the CPU workers), the device decoder's name, both
                joined by "+", or "none"; cpu_decodes, device_decodes (int): how
                many each.
            device_decode_failures, device_decode_failed_batches,
                device_decode_small_batches (int): images a failed device decode
                handed back to the CPU workers; batches whose device decode failed;
                batches too small for the device decoder (nvJPEG hybrid: 50 or
                fewer), decoded by the workers.
            output_upload_bytes (int): bytes that went up to output_device (the
                host-prepared samples).
            device_download_bytes (int): bytes of device-prepared samples that came
                down to host memory (0 when output_device is the offload device: they
                are written in place).
            host_round_trips (int): device-prepared samples that went down and up again
                (output_device another device than the offload device).
            feeder_cpu_ns (int): CPU time of the device feeder's threads (their waits sleep).
            thread_cpu_samples, thread_cpu_ns, thread_decode_cpu_ns (int): the samples the
                CPU worker threads ran start to finish, the threads' own CPU time on them
                (the thread CPU clock, which other processes' use of the cores does not
                inflate) and the part of it spent decoding.
            batch_stage_ns (int): the mixup_cutmix batch stage (consumer thread, in next();
                with a device output_device its draws and soft labels: the images are
                mixed on the device).
            held (int): batches handed out and still referenced.
            source_ignored_files (int): files in the class folders of a folder
                source left out for their extension (not one of torchvision's
                IMG_EXTENSIONS), as ImageFolder leaves them out.
            source_ignored_members (int): members of a tar: source's shards that belong
                to no sample (no suffix, a .json or .txt, a second image...), as
                webdataset ignores them.
            node_group (str): the node group whose coordinator sets num_threads
                (FF_NODE_GROUP, auto resolved), or "" when the loader runs alone.
            host_memory_pinned (bool): the host batches are in pinned memory (pin_memory).
            op_costs (dict): per kind of op (``"resize"``, ``"fused_lut"``, ...):
                calls, ns, pixels (ints), ns_per_image, ns_per_pixel (floats).
            remote (dict): remote workers (``remote=``; docs/remote.md): placement_samples
                (samples handed out by placement: "cpu", "split", "device", "remote"),
                workers, share (the policy's remote share now), microbatches (completed),
                latency_ns (their round trips summed), rtt_s (the round trip expected now),
                bytes_sent (encoded bytes sent: 0 when the workers read the source),
                bytes_received (uint8 results), retries, worker_cpu_ns (the actors' CPU
                time), convert_ns (this process converting remote samples), fallbacks
                (samples sent remote that ran here), timeouts, late (results dropped),
                note (why remote work stopped, or ""); with remote workers also
                actors_started, actors_killed (past their deadline), actors_lost,
                dropped_results, gave_up (microbatches out of attempts), pool_lost, actors.
        """
        c = self._open()
        s = c.stats()
        s["held"] = c.held()
        costs = {}
        for entry in s["op_costs"]:
            calls, ns, pixels = entry["calls"], entry["ns"], entry["pixels"]
            costs[entry["op"]] = {"calls": calls, "ns": ns, "pixels": pixels,
                                  "ns_per_image": ns / calls if calls else 0.0,
                                  "ns_per_pixel": ns / pixels if pixels else 0.0}
        s["op_costs"] = costs
        if self._remote is not None:
            s["remote"].update(self._remote.stats())
        return s

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
            c.close(self._fence_stream(c))
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
        source = repr(self.source) if _is_path(self.source) else f"<{type(self.source).__name__} dataset>"
        return (f"fusionflow.Loader(source={source}, batch_size={self.batch_size}, shuffle={self.shuffle}, "
                f"drop_last={self.drop_last}, seed={self.seed}, rank={self.rank}, world_size={self.world_size}, "
                f"{state})")


class _EpochIterator:
    """Not a generator: a generator's frame would keep the last batch alive while suspended."""

    __slots__ = ("_loader", "_iteration", "_done")

    def __init__(self, loader, iteration):
        self._loader = loader
        self._iteration = iteration
        self._done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self._done:
            raise StopIteration
        batch = self._loader._next_batch(self._iteration)
        if batch is None:
            self._done = True
            raise StopIteration
        return batch

    def __len__(self):
        return len(self._loader)


def augment_image(path, pipeline, seed=0, epoch=0, index=0, output="numpy", semantics="v1"):
    """Runs ``pipeline`` on one image file as sample ``index`` of ``epoch`` under
    ``seed`` -- exactly the draws a Loader makes for that sample -- and returns
    the result before any final ``to_dtype``/``normalize``.

    Args:
        path (str or os.PathLike): an image file (JPEG, PNG, WebP, TIFF, PBM/PGM/PPM or BMP).
        pipeline (str): pipeline text (need not give a fixed size).
        seed, epoch, index (int): >= 0; ``index`` is the sample's dataset index.
        output (str): ``"numpy"`` (default), ``"torch"`` or ``"dlpack"``.
        semantics (str): ``"v1"`` (default) or ``"v2"``, as for Loader.
    Returns:
        ``(H, W, 3)`` uint8 RGB array (HWC).
    Raises:
        PipelineError (bad pipeline text), FileNotFoundError / OSError,
        DecodeError (corrupt image, or larger than 89478485 pixels), MemoryError,
        ValueError.
    """
    if output not in ("numpy", "torch", "dlpack"):
        raise ValueError(f"fusionflow.augment_image: output must be 'numpy', 'torch' or 'dlpack' (got {output!r})")
    for name, value in (("seed", seed), ("epoch", epoch), ("index", index)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 64:
            raise ValueError(f"fusionflow.augment_image: {name} must be an int in [0, 2**64) (got {value!r})")
    semantics_value = _semantics("augment_image", semantics)
    convert = _converter(output, "fusionflow.augment_image")
    return convert(_c.augment_image(os.fspath(path), pipeline, seed, epoch, index, semantics_value))
