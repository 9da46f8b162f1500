"""kiln: CUDA kernels (vector add, axpby, RMSNorm, softmax, RoPE, SiLU-and-multiply, embedding
lookup), cuBLAS matmul, cuDNN softmax and an NCCL all-reduce, for any DLPack array.

Inputs: any object with ``__dlpack__``/``__dlpack_device__``. CUDA arrays (torch, cupy, jax)
are used in place, zero-copy; host arrays (numpy, CPU torch) are copied to the GPU. Results are
``kiln.Array``: device memory that ``torch.from_dlpack`` / ``cupy.from_dlpack`` take zero-copy;
``.numpy()`` copies to the host. Each op runs on the caller's stream: ``stream=``, else the
innermost ``with kiln.stream(s):``, else torch's current stream for torch inputs (cupy's for
cupy inputs), else the legacy default stream; ``out=`` writes into a preallocated array. Ops
can be captured into CUDA graphs (``torch.cuda.graph``); those that cannot raise
``kiln.CaptureError``. See docs/streams.md.

Without an NVIDIA driver, ``import kiln`` and ``kiln.build_info()`` work; operations raise
``kiln.NoDriverError``. How the NVIDIA libraries are found: see ``kiln._preload``.
"""

from . import _errors, _kiln, _preload
from ._errors import *  # noqa: F401,F403
from ._kiln import *  # noqa: F401,F403

__version__: str = _kiln.__version__

# Before any operation can dlopen cuBLAS/cuDNN/NCCL: load them from the NVIDIA wheels (a copy
# already in the process, e.g. torch's, is used as it is).
_preload.preload(_kiln.build_info()["runtime_libraries"])


def build_info():
    """What this extension was built from (see ``_kiln.build_info``), plus
    ``loaded_libraries``: per soname, the cuBLAS/cuDNN/NCCL version actually loaded in this
    process (the library's own run-time answer), its file, whether it was already loaded before
    kiln asked, and the range kiln declares; or the error (missing, older than the range)."""
    info = _kiln.build_info()
    info["loaded_libraries"] = _kiln._loaded_libraries()
    return info


def runtime_libraries():
    """For each NVIDIA library soname: where ``import kiln`` loaded it from, or why not."""
    return _preload.report()


__all__ = sorted(set(_kiln.__all__) | set(_errors.__all__) | {"runtime_libraries", "__version__"})
