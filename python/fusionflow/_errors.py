"""The exceptions fusionflow raises, one per kind of library status.

Every exception raised for a failing library call derives from
:class:`fusionflow.Error` and carries the library's message (naming the file
and the reason for data errors, the column for pipeline errors). Each also
derives from the built-in exception a Python user expects for its kind, so
``except ValueError`` or ``except OSError`` work as usual:

================  ==============================  =====================================
library status    exception                       also an instance of
================  ==============================  =====================================
FF_EINVAL         InvalidArgumentError            ValueError
FF_EPIPELINE      PipelineError                   ValueError
FF_EDATA          DecodeError                     (Error only)
FF_ETOOBIG        DecodeError                     (Error only)
FF_EEMPTY         EmptySourceError                ValueError
FF_EIO            LoaderFileNotFoundError         FileNotFoundError (a missing file)
FF_EIO            LoaderOSError                   OSError (any other I/O failure)
FF_ENOMEM         OutOfMemoryError                MemoryError
FF_EDEVICE        DeviceError                     RuntimeError
FF_EDEVICE        DeviceUnavailableError          ValueError (Loader(device=...) at open)
FF_EINTERNAL      InternalError                   RuntimeError
================  ==============================  =====================================

``status`` on the exception is the library's numeric code (negative).
"""

import errno as _errno

from . import _fusionflow as _c


class Error(Exception):
    """Base class of every error the fusionflow library reports.

    Attributes:
        status (int): the library's ff_status code (negative), e.g. -10 for FF_EDATA.
    """

    status = None

    def __init__(self, message, status=None):
        super().__init__(message)
        if status is not None:
            self.status = status


class InvalidArgumentError(Error, ValueError):
    """An invalid argument or configuration value (FF_EINVAL); the message names the field."""


class PipelineError(Error, ValueError):
    """The pipeline text does not parse or cannot run (FF_EPIPELINE); the message names the column."""


class DecodeError(Error):
    """An image is corrupt, truncated, of an unsupported kind (FF_EDATA) or larger than
    max_image_pixels (FF_ETOOBIG); the message names the file and the reason."""


class EmptySourceError(Error, ValueError):
    """The source holds no sample, or none for this rank (FF_EEMPTY)."""


class LoaderOSError(Error, OSError):
    """A file or folder could not be opened or read (FF_EIO)."""

    def __init__(self, message, status=None, errno=None):
        Error.__init__(self, message, status)
        if errno is not None:
            self.errno = errno  # str(exc) stays the library's message (strerror is not set)


class LoaderFileNotFoundError(LoaderOSError, FileNotFoundError):
    """A file or folder does not exist (FF_EIO with ENOENT)."""


class OutOfMemoryError(Error, MemoryError):
    """Host memory could not be allocated (FF_ENOMEM)."""


class DeviceError(Error, RuntimeError):
    """A device error (FF_EDEVICE)."""


class DeviceUnavailableError(DeviceError, ValueError):
    """The device named in ``Loader(device=...)`` cannot be opened here (FF_EDEVICE at
    open): no GPU, no driver, or a build without CUDA. Also a ValueError, as any bad
    argument is."""


class InternalError(Error, RuntimeError):
    """A bug in fusionflow (FF_EINTERNAL): please report it with the message."""


_BY_STATUS = {
    _c.FF_EINVAL: InvalidArgumentError,
    _c.FF_EPIPELINE: PipelineError,
    _c.FF_EDATA: DecodeError,
    _c.FF_ETOOBIG: DecodeError,
    _c.FF_EEMPTY: EmptySourceError,
    _c.FF_ENOMEM: OutOfMemoryError,
    _c.FF_EDEVICE: DeviceError,
    _c.FF_EINTERNAL: InternalError,
}

for _cls in (Error, InvalidArgumentError, PipelineError, DecodeError, EmptySourceError, LoaderOSError,
             LoaderFileNotFoundError, OutOfMemoryError, DeviceError, DeviceUnavailableError, InternalError):
    _cls.__module__ = "fusionflow"

_NOT_FOUND = ("No such file or directory",)


def _exception(status, message):
    """Builds the exception for a library status and message (called by the C extension)."""
    if status == _c.FF_EIO:
        if any(text in message for text in _NOT_FOUND):
            return LoaderFileNotFoundError(message, status, _errno.ENOENT)
        return LoaderOSError(message, status)
    cls = _BY_STATUS.get(status, InternalError)
    return cls(message, status)


_c._set_exception_factory(_exception)
