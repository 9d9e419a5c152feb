"""Loader's arguments turned into the C values of ff_config (fusionflow.h).

This module only converts: names to the library's enum values, Python objects
to C ints, and None to the library's "resolve it yourself" sentinel. Ranges,
combinations and the environment ($RANK, $WORLD_SIZE) are the library's to
check at ff_loader_open; its FF_EINVAL comes back as
:class:`fusionflow.InvalidArgumentError` (a ValueError) with its message,
which names the parameter. A value that cannot be converted at all (a str for
an int, a name that is no enum's, an int too wide for its C field) raises
TypeError or ValueError here, naming the parameter too.
"""
import operator
import os

from ._dataloader import dataloader_names
from ._output import OUTPUTS

DEVICE_DECODE = {"auto": 0, "off": 1, "on": 2}  # ff_device_decode
DTYPES = {None: 0, "float32": 1, "bfloat16": 2, "float16": 3, "uint8": 4}  # ff_output_dtype
MEMORY_FORMATS = {None: 0, "contiguous_format": 1, "channels_last": 2}  # ff_memory_format
SEMANTICS = {"v1": 0, "v2": 1}  # ff_semantics
ON_ERROR = {"raise": 0, "skip": 1, "replace": 2}  # ff_on_error
PERMUTATIONS = {"philox": 0, "torch": 1}  # ff_permutation
MEMBER_BYTES_AUTO = (1 << 64) - 1  # FF_MEMBER_BYTES_AUTO

# The C type of each integer field, as open_loader parses it: (lowest, highest).
_INT = (-(1 << 31), (1 << 31) - 1)
_U64 = (0, (1 << 64) - 1)


def enum(where, name, value, table):
    """table[value], or ValueError naming the parameter and the values it takes."""
    try:
        return table[value]
    except (KeyError, TypeError):
        names = [repr(k) for k in table]
        raise ValueError(f"{where}: {name} must be {', '.join(names[:-1])} or {names[-1]} (got {value!r})") from None


def semantics_value(where, semantics):
    return enum(where, "semantics", semantics, SEMANTICS)


def c_int(where, name, value, bounds=_INT):
    """An int (or what stands for one: numpy's integers, not bools) that fits the C field."""
    try:
        v = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        v = None
    if v is None:
        raise TypeError(f"{where}: {name} must be an int (got {type(value).__name__})")
    if not bounds[0] <= v <= bounds[1]:
        low, high = ("0", "2**64") if bounds == _U64 else ("-2**31", "2**31")
        raise ValueError(f"{where}: {name} must be an int in [{low}, {high}) (got {value!r})")
    return v


def c_u64(where, name, value):
    return c_int(where, name, value, _U64)


def c_str(where, name, value):
    if not isinstance(value, str):
        raise TypeError(f"{where}: {name} must be a str (got {type(value).__name__})")
    return value


def open_args(source, pipeline, a, where="fusionflow.Loader"):
    """The keyword arguments of _fusionflow.open_loader for a Loader's settings ``a``
    (a dict of its parameters after recipe= is resolved). ``source`` is the text the
    library opens ("dataset" for a Python dataset)."""
    num_threads, prefetch = dataloader_names(a["num_threads"], a["num_workers"], a["prefetch"],
                                             a["prefetch_factor"], a["dataloader_kwargs"])
    dtype, memory_format, output = a["dtype"], a["memory_format"], a["output"]
    dtype_name = None if dtype is None else str(dtype).replace("torch.", "")
    format_name = None if memory_format is None else str(memory_format).replace("torch.", "")
    enum(where, "output", output, {k: k for k in OUTPUTS})
    output_device = c_str(where, "output_device", a["output_device"])
    if dtype_name == "bfloat16" and output == "numpy":
        raise ValueError(f"{where}: NumPy has no bfloat16: use output=\"torch\" or \"dlpack\"")
    if output == "numpy" and output_device.startswith("cuda"):
        raise ValueError(f"{where}: output=\"numpy\" cannot hold GPU batches: use output=\"torch\" or \"dlpack\" "
                         f"with output_device={output_device!r}")
    pin_memory = a["pin_memory"]
    if pin_memory not in (None, True, False):
        raise TypeError(f"{where}: pin_memory must be None, True or False (got {pin_memory!r})")
    if not isinstance(pipeline, str):
        raise TypeError(f"{where}: pipeline must be a str (got {type(pipeline).__name__})")
    # None stands for the library's own choice: -1 (rank, world_size: $RANK, $WORLD_SIZE), 0 (the rest).
    rank, world_size = a["rank"], a["world_size"]
    for name, value in (("rank", rank), ("world_size", world_size)):
        if value is not None and c_int(where, name, value) < 0:
            raise ValueError(f"{where}: {name} must be a non-negative int or None (got {value!r})")
    max_member_bytes = a["max_member_bytes"]
    member_bytes = (MEMBER_BYTES_AUTO if max_member_bytes == "auto"
                    else 0 if max_member_bytes is None else c_u64(where, "max_member_bytes", max_member_bytes))
    if member_bytes == MEMBER_BYTES_AUTO and max_member_bytes != "auto":
        raise ValueError(f"{where}: max_member_bytes must be 'auto', None or an int in [0, 2**64 - 1) "
                         f"(got {max_member_bytes!r})")
    max_image_pixels = a["max_image_pixels"]
    return dict(
        source=source, pipeline=pipeline,
        batch_size=c_int(where, "batch_size", a["batch_size"]), shuffle=int(bool(a["shuffle"])),
        drop_last=int(bool(a["drop_last"])), seed=c_u64(where, "seed", a["seed"]),
        num_threads=0 if num_threads is None else c_int(where, "num_threads", num_threads),
        prefetch=c_int(where, "prefetch", prefetch),
        rank=-1 if rank is None else rank, world_size=-1 if world_size is None else world_size,
        on_error=enum(where, "on_error", a["on_error"], ON_ERROR),
        max_image_pixels=0 if max_image_pixels is None else c_u64(where, "max_image_pixels", max_image_pixels),
        device=c_str(where, "device", a["device"]),
        device_memory_limit_bytes=c_u64(where, "device_memory_limit_bytes", a["device_memory_limit_bytes"]),
        strict_decode=bool(a["strict_decode"]), allow_empty=bool(a["allow_empty"]),
        sampler_drop_last=bool(a["sampler_drop_last"]),
        torch_permutation=bool(enum(where, "permutation", a["permutation"], PERMUTATIONS)),
        pin_memory=-1 if pin_memory is None else 2 if pin_memory else 0, output_device=output_device,
        device_decode=enum(where, "device_decode", a["device_decode"], DEVICE_DECODE),
        deterministic=bool(a["deterministic"]),
        output_dtype=enum(where, "dtype", dtype_name, DTYPES),
        memory_format=enum(where, "memory_format", format_name, MEMORY_FORMATS),
        semantics=semantics_value(where, a["semantics"]),
        repeated_augmentations=c_int(where, "repeated_augmentations", a["repeated_augmentations"]),
        shuffle_buffer=c_u64(where, "shuffle_buffer", a["shuffle_buffer"]),
        max_member_bytes=member_bytes)


def normalize_source(source):
    """The source as text; the library resolves its kind (a bare folder or .tsv/.txt file too)."""
    text = os.fspath(source)
    return os.fsdecode(text) if isinstance(text, bytes) else text


def is_path(source):
    return isinstance(source, (str, bytes, os.PathLike))
