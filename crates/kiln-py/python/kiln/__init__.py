"""kiln: CUDA kernels (vector add, axpby, RMSNorm, softmax, RoPE, SiLU-and-multiply, embedding
lookup), cuBLAS matmul, cuDNN softmax and an NCCL all-reduce, for torch tensors and any DLPack
array. docs/python.md is the guide.

Torch tensors in, torch tensors out: with torch tensors, every op is a torch custom op
(``torch.ops.kiln.*``; the output allocated by torch on the input's device, the kernel run on
torch's current stream), so ``torch.compile(fullgraph=True)`` and ``torch.cuda.graph`` see it.
Other inputs: any object with ``__dlpack__``/``__dlpack_device__``; CUDA arrays (cupy, jax) are
used in place, host arrays (numpy) are copied to the GPU; results are ``kiln.Array``, which
``torch.from_dlpack`` / ``cupy.from_dlpack`` take zero-copy. Each op runs on the caller's
stream: ``stream=``, else the innermost ``with kiln.stream(s):``, else torch's current stream for
torch inputs (cupy's for cupy inputs), else the legacy default stream. See docs/streams.md.

Without an NVIDIA driver, ``import kiln``, ``kiln.build_info()``, ``kiln.device_count()`` (0) and
``kiln.is_available()`` (False) work; operations raise ``kiln.NoDriverError``. Every error kiln
raises is a ``kiln.KilnError``. ``import kiln`` loads no CUDA library: cuBLAS, cuDNN and NCCL
are loaded by the first call that needs them (see ``kiln._preload``).
"""

import sys as _sys

from . import _errors, _kiln
from ._api import (
    all_reduce_sum,
    axpby,
    build_info,
    copy,
    cudnn_softmax,
    device_count,
    embedding,
    embedding_checked,
    is_available,
    matmul,
    register_torch_ops,
    rmsnorm,
    rope,
    runtime_libraries,
    silu_mul,
    softmax,
    vecadd,
)
from ._errors import *  # noqa: F401,F403
from ._kiln import Array, StreamScope, asarray, current_stream, device_info, stream, synchronize
from . import rs

__version__: str = _kiln.__version__

# torch already imported: register the custom ops now, so that torch.compile meets them
# registered whatever the first call is.
if "torch" in _sys.modules:
    register_torch_ops()

__all__ = sorted(
    set(_errors.__all__)
    | {
        "Array", "StreamScope", "all_reduce_sum", "asarray", "axpby", "build_info", "copy",
        "cudnn_softmax", "current_stream", "device_count", "device_info", "embedding",
        "embedding_checked", "is_available", "matmul", "register_torch_ops", "rmsnorm", "rope",
        "rs", "runtime_libraries", "silu_mul", "softmax", "stream", "synchronize", "vecadd",
        "__version__",
    }
)
