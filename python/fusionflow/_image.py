"""augment_image: one image file through a pipeline, with exactly the draws a
Loader makes for that sample -- for looking at what a pipeline does, and for
checking one sample against a reference (fusionflow.check).
"""
import os

from . import _fusionflow as _c
from ._args import semantics_value
from ._output import converter


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
    semantics_c = semantics_value("fusionflow.augment_image", semantics)
    convert = converter(output, "fusionflow.augment_image")
    return convert(_c.augment_image(os.fspath(path), pipeline, seed, epoch, index, semantics_c))
