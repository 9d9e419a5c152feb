"""fusionflow: a data loader for training vision models.

Reads a folder of JPEG/PNG images, runs the torchvision training pipeline
(random resized crop, flip, augmentation policies, normalize) on a pool of C
threads and hands out ordered batches as torch tensors or NumPy arrays without
copying (DLPack). Batches are bit-identical for a seed whatever the number of
threads.

    import fusionflow
    loader = fusionflow.Loader("imagefolder:/data/train",
                               "decode | random_resized_crop(size=224) | random_horizontal_flip"
                               " | normalize(mean=imagenet, std=imagenet)", batch_size=256)
    for epoch in range(90):
        loader.set_epoch(epoch)
        for images, labels in loader:   # (256, 3, 224, 224) float32, (256,) int64
            ...

See Loader, augment_image, and the exceptions (Error and its subclasses).
"""

from . import _fusionflow
from ._errors import (DecodeError, DeviceError, DeviceUnavailableError, EmptySourceError, Error, InternalError,
                      InvalidArgumentError, LoaderFileNotFoundError, LoaderOSError, OutOfMemoryError, PipelineError)
from ._dataloader import BatchSampler, Sampler, SourceDataset
from ._fusionflow import Tensor
from ._image import augment_image
from ._loader import BatchInfo, Loader
from ._recipes import recipe_pipeline, recipes

__version__ = "0.1.0"
library_version = _fusionflow.version()
"""The linked C library's version, "MAJOR.MINOR.PATCH"."""
cpu_isa = _fusionflow.cpu_isa
"""cpu_isa() -> "avx512", "avx2" or "scalar": the widest vector path the CPU ops take in this
process (the CPU's, capped by the environment variable FF_CPU_ISA); every path gives the
same bytes."""

__all__ = [
    "Loader", "BatchInfo", "SourceDataset", "Sampler", "BatchSampler", "Tensor", "augment_image", "recipes",
    "recipe_pipeline", "Error", "InvalidArgumentError", "PipelineError",
    "DecodeError", "EmptySourceError", "LoaderOSError", "LoaderFileNotFoundError", "OutOfMemoryError",
    "DeviceError", "DeviceUnavailableError", "InternalError", "library_version", "cpu_isa",
]
