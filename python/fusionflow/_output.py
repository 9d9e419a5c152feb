"""What batches become: torch tensors, NumPy arrays or the package's own DLPack tensors."""

OUTPUTS = ("auto", "torch", "numpy", "dlpack")


def _to_numpy(t):
    import numpy as np

    if hasattr(np, "from_dlpack"):  # NumPy >= 1.23 (1.22 had it as _from_dlpack)
        return np.from_dlpack(t)
    if hasattr(np, "_from_dlpack"):
        return np._from_dlpack(t)
    return np.asarray(t)  # __array_interface__, still no copy


def _to_torch(t):
    import torch

    if hasattr(torch, "from_dlpack"):  # torch >= 1.10
        return torch.from_dlpack(t)
    from torch.utils import dlpack

    return dlpack.from_dlpack(t.__dlpack__())


def _identity(t):
    return t


def _importable(name):
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def resolve(output):
    """The output kind ``output`` stands for: "auto" is "torch" when torch imports, else
    "numpy" when NumPy does, else "dlpack" (fusionflow.Tensor: ``__dlpack__``, ``shape``,
    ``__array_interface__``)."""
    if output != "auto":
        return output
    return "torch" if _importable("torch") else "numpy" if _importable("numpy") else "dlpack"


def converter(output, where="fusionflow"):
    """The function that turns a fusionflow.Tensor into the output kind. Raises
    ImportError in one line naming the package and the alternative when the kind's
    package is not installed (here, not mid-epoch)."""
    output = resolve(output)
    if output == "dlpack":
        return _identity
    package = "torch" if output == "torch" else "numpy"
    if not _importable(package):
        raise ImportError(f"{where}: output={output!r} needs {package} (pip install {package}), or pass "
                          "output=\"dlpack\" for fusionflow.Tensor objects (DLPack, NumPy's array interface)")
    return _to_torch if output == "torch" else _to_numpy
