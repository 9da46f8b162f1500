"""kiln's exceptions. The extension raises these (it imports this module when it raises), so
they can subclass two builtins: a ShapeError is both a kiln.KilnError and a ValueError."""


class KilnError(RuntimeError):
    """Base class of every error kiln raises about the GPU or its libraries."""


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
]
