"""The worker side of scale-out: a pipeline run over encoded samples on the C
library's threads (ff_augmenter in fusionflow.h), without a Loader.

What a Ray Data ``map_batches`` actor (fusionflow.ray.Augment) runs, and what a
remote worker that takes a share of a Loader's batches runs: a microbatch of
(bytes or nothing, sample index) items for one epoch, each planned by (seed,
epoch, index) exactly as a Loader with the same seed plans that sample, so the
pixels are the Loader's. Needs NumPy, not Ray.
"""
import os

from . import _errors
from . import _fusionflow as _c
from ._args import semantics_value

__all__ = ["SampleAugmenter"]

# (dtype, layout) -> ff_output_dtype, ff_memory_format
_FORMATS = {("uint8", "hwc"): (4, 0), ("uint8", "chw"): (4, 1), ("float32", "chw"): (1, 1),
            ("float32", "hwc"): (1, 2), ("float16", "chw"): (3, 1), ("float16", "hwc"): (3, 2)}


def _count(where, name, value, low=0):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 1 << 64:
        raise ValueError(f"fusionflow.{where}: {name} must be an int in [{low}, 2**64) (got {value!r})")
    return value


class SampleAugmenter:
    """Runs ``pipeline`` on lists of encoded images, each as sample ``index`` of an epoch.

    Args:
        pipeline (str): pipeline text with a fixed output size, as for Loader (no views, no
            mixup_cutmix). It may end in ``normalize``/``to_dtype`` whatever the dtype.
        seed (int): the Loader's seed: the same (seed, epoch, index) gives the Loader's pixels.
        dtype (str): ``"uint8"`` (default): the pixels before a final normalize/to_dtype, which
            the consumer applies (a quarter of float32's bytes); ``"float32"`` or ``"float16"``:
            the Loader's output values (the pipeline must end in normalize or to_dtype).
        layout (str): ``"hwc"`` (default for uint8): each sample ``(H, W, 3)``; ``"chw"``
            (default for the float types): ``(3, H, W)`` planes.
        num_threads (int): threads of a run (the calling one among them); 0 or None: the cores
            this process may use.
        semantics (str): ``"v1"`` (default) or ``"v2"``, as for Loader.
        max_image_pixels, strict_decode: as for Loader.
        source (str): optional, a Loader source ("imagefolder:ROOT", "list:FILE",
            "tar:PATTERN" of local shards): its index, in the Loader's order, for ``samples()``
            and for items given without bytes (read from there).
        allow_empty (bool): as for Loader, with ``source``.
    Raises:
        PipelineError, InvalidArgumentError (a pipeline or format the augmenter cannot run),
        the source's errors as Loader raises them, ValueError.
    """

    def __init__(self, pipeline, *, seed=0, dtype="uint8", layout=None, num_threads=None, semantics="v1",
                 max_image_pixels=_c.DEFAULT_MAX_IMAGE_PIXELS, strict_decode=False, source=None, allow_empty=False):
        if layout is None:
            layout = "hwc" if dtype == "uint8" else "chw"
        if (dtype, layout) not in _FORMATS:
            raise ValueError(f"fusionflow.SampleAugmenter: dtype must be 'uint8', 'float32' or 'float16' and "
                             f"layout 'hwc' or 'chw' (got {dtype!r}, {layout!r})")
        if not isinstance(pipeline, str):
            raise TypeError(f"fusionflow.SampleAugmenter: pipeline must be a str (got {type(pipeline).__name__})")
        _count("SampleAugmenter", "seed", seed)
        if num_threads is not None and (isinstance(num_threads, bool) or not isinstance(num_threads, int)
                                        or not 0 <= num_threads <= 1 << 20):
            raise ValueError(f"fusionflow.SampleAugmenter: num_threads must be an int >= 0 or None "
                             f"(got {num_threads!r})")
        output_dtype, memory_format = _FORMATS[dtype, layout]
        self.pipeline, self.seed, self.dtype, self.layout = pipeline, seed, dtype, layout
        self._c = _c.CAugmenter(
            pipeline, seed=seed, num_threads=num_threads or 0, output_dtype=output_dtype,
            memory_format=memory_format, semantics=semantics_value("fusionflow.SampleAugmenter", semantics),
            max_image_pixels=0 if max_image_pixels is None else int(max_image_pixels),
            strict_decode=bool(strict_decode), source=None if source is None else os.fspath(source),
            allow_empty=bool(allow_empty))
        shape, strides, _ = self._c.sample_shape
        channels_last = strides[0] == 1  # reported (3, H, W), stored (H, W, 3)
        self.shape = (shape[1], shape[2], 3) if channels_last else shape
        """One sample's shape: (H, W, 3) or (3, H, W)."""

    @property
    def dataset_size(self):
        """Samples in the source's index (0 without a source)."""
        return self._c.dataset_size

    def samples(self):
        """The source's index, in the Loader's order: a list of (path, member, label), member the
        image member of a tar shard (path the shard) or None for a file."""
        return self._c.samples()

    def run(self, epoch, datas, indices, names=None):
        """Runs one microbatch of ``epoch``.

        Args:
            epoch (int): the epoch the draws are for.
            datas (list): per sample its encoded image as ``bytes``, or None to read sample
                ``indices[k]`` from the source.
            indices (list of int): per sample its dataset index (the Loader's order).
            names (list of str or None): per sample the name its errors give (a path); None:
                the source's path, else "sample[INDEX]".
        Returns:
            ``(images, errors)``: images a NumPy array ``(len(datas), *shape)`` of dtype
            (a failed sample's values are unspecified), errors a list of ``(k, exception)`` for
            the samples that failed (the exception Loader would raise for that sample:
            DecodeError, LoaderOSError, ...).
        """
        import numpy as np

        _count("SampleAugmenter.run", "epoch", epoch)
        out, statuses, messages = self._c.run(epoch, list(datas), [int(i) for i in indices],
                                              None if names is None else list(names))
        images = np.frombuffer(out, dtype=self.dtype).reshape((len(statuses),) + tuple(self.shape))
        errors = [(k, _errors._exception(st, messages[k] or _c.status_str(st)))
                  for k, st in enumerate(statuses) if st]
        return images, errors

    def close(self):
        """Stops the threads (idempotent)."""
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
