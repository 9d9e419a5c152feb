"""The training-recipe presets (ff_recipe_* in fusionflow.h): what
``fusionflow recipe --list`` shows, and the pipeline Loader(recipe=NAME) runs.
"""
import operator

from . import _errors
from . import _fusionflow as _c


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
