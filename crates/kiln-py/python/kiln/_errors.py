"""kiln's exceptions. The extension raises these (it imports this module when it raises), so
they can subclass two builtins: a ShapeError is both a kiln.KilnError and a ValueError."""


class KilnError(RuntimeError):
    """Base class of every error kiln raises: `except kiln.KilnError` catches them all. Errors
    about bad arguments also derive from the builtin Python expects (TypeError, ValueError,
    IndexError, BufferError), so `except ValueError` keeps working."""


class NoDriverError(KilnError):
    """No NVIDIA driver: libcuda.so.1 could not be loaded. import kiln and kiln.build_info()
    still work; every GPU operation raises this."""


class NoDeviceError(KilnError):
    """The driver loaded but the requested CUDA device does not exist."""


class MissingLibraryError(KilnError):
    """cuBLAS, cuDNN or NCCL could not be loaded (install the NVIDIA wheel the message names)."""


class CudaError(KilnError):
    """A CUDA driver, cuBLAS, cuDNN or NCCL call failed."""


class ShapeError(KilnError, ValueError):
    """The operands' shapes do not fit the operation (checked before anything is launched)."""


class DTypeError(KilnError, TypeError):
    """The operands' element types do not fit the operation."""


class DeviceMemoryError(KilnError, ValueError):
    """An input is not usable device memory of the GPU the operation runs on."""


class ArgumentTypeError(KilnError, TypeError):
    """An argument is of a kind kiln cannot take (not a DLPack array, not a stream)."""


class ArgumentValueError(KilnError, ValueError):
    """An argument has a value kiln cannot use (a stream handle out of range, conflicting
    options, memory that is neither CUDA device nor host memory)."""


class LayoutError(KilnError, ValueError):
    """An array is not contiguous row-major (call .contiguous() / numpy.ascontiguousarray)."""


class ExportError(KilnError, BufferError):
    """A DLPack export kiln cannot honour (copy=True, another device)."""


class NoBackwardError(KilnError):
    """Autograd reached a kiln op that has no backward formula (docs/python.md lists which
    ops have one)."""


class IdOutOfRangeError(KilnError, IndexError):
    """An index (an embedding id) is outside the valid range."""


class CaptureError(KilnError):
    """The operation cannot run while its stream captures a CUDA graph (it would wait for the
    GPU or read a result back, which cannot be recorded). Raised before anything is enqueued:
    the capture is left intact. docs/streams.md lists what is capture-safe."""


__all__ = [
    "CaptureError",
    "KilnError",
    "NoDriverError",
    "NoDeviceError",
    "MissingLibraryError",
    "CudaError",
    "ShapeError",
    "DTypeError",
    "DeviceMemoryError",
    "IdOutOfRangeError",
    "ArgumentTypeError",
    "ArgumentValueError",
    "LayoutError",
    "ExportError",
    "NoBackwardError",
]
