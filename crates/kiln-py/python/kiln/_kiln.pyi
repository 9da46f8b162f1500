"""Type stubs for kiln's extension module. Its op functions are the raw ones (kiln.Array out
for every input); `kiln.<op>` (kiln/_api.pyi) is what users call."""

from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, TypeVar, Union, overload

import numpy as np

__version__: str

class _DLPackArray(Protocol):
    """Anything with the DLPack protocol: torch/cupy/jax/numpy arrays, kiln.Array. (Only
    ``__dlpack_device__`` is spelled out: producers type ``__dlpack__``'s keywords differently.)"""

    def __dlpack_device__(self) -> Tuple[int, int]: ...

class _CudaStreamProtocol(Protocol):
    def __cuda_stream__(self) -> Tuple[int, int]: ...

class _TorchLikeStream(Protocol):
    @property
    def cuda_stream(self) -> int: ...

class _CupyLikeStream(Protocol):
    @property
    def ptr(self) -> int: ...

ArrayLike = _DLPackArray
# A CUDA stream: a raw handle (0/1 legacy default, 2 per-thread default, else a CUstream
# address) or an object with __cuda_stream__, .cuda_stream (torch) or .ptr (cupy); None: the
# default rule (docs/streams.md).
StreamLike = Union[None, int, _CudaStreamProtocol, _TorchLikeStream, _CupyLikeStream]
_Out = TypeVar("_Out")

class StreamScope:
    """What kiln.stream(s) returns: a context manager (see docs/streams.md)."""

    @property
    def handle(self) -> Optional[int]: ...
    def __enter__(self) -> "StreamScope": ...
    def __exit__(self, *exc: Any) -> bool: ...

def stream(stream: StreamLike) -> StreamScope:
    """`with kiln.stream(s):` runs the kiln calls of the block (this thread) on s."""

def current_stream() -> Optional[int]:
    """The handle set by the innermost kiln.stream block, or None (follow the producer)."""

class Array:
    """Device memory owned by kiln: pass it to torch.from_dlpack / cupy.from_dlpack
    (zero-copy) or copy it to the host with .numpy()."""

    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str:
        """"float32", "float16", "bfloat16", "int32" or "int64"."""
    @property
    def device(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def ndim(self) -> int: ...
    @property
    def data_ptr(self) -> int: ...
    @property
    def stream(self) -> int:
        """The stream it was produced on (0 = legacy default stream)."""
    def __len__(self) -> int: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any:
        """A DLPack capsule."""
    def numpy(self) -> np.ndarray[Any, Any]:
        """A host copy as a numpy array (bfloat16 comes back as float32)."""
    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray[Any, Any]: ...

def _loaded_libraries() -> Dict[str, Dict[str, Any]]: ...

def build_info() -> Dict[str, Any]:
    """The embedded build manifest (targets with their kernels, matrix, min_driver, toolchain,
    flags, sources, provenance) plus version; commit, dirty, rustc and clang (copied from the
    manifest's provenance, their single source); features {cuda, cublas, cudnn, nccl},
    runtime_libraries, and matrix_targets (the targets the manifest's matrix asks for,
    [{target, kind}])."""

def vecadd(a: ArrayLike, b: ArrayLike, *, out: Optional[ArrayLike] = None, stream: StreamLike = None) -> Array: ...
def axpby(
    x: ArrayLike, y: ArrayLike, alpha: float = 1.0, beta: float = 1.0, *,
    out: Optional[ArrayLike] = None, stream: StreamLike = None,
) -> Array: ...
def silu_mul(gate: ArrayLike, up: ArrayLike, *, out: Optional[ArrayLike] = None, stream: StreamLike = None) -> Array: ...
def rmsnorm(
    x: ArrayLike, weight: ArrayLike, eps: float = 1e-6, *, out: Optional[ArrayLike] = None, stream: StreamLike = None
) -> Array: ...
def softmax(x: ArrayLike, *, out: Optional[ArrayLike] = None, stream: StreamLike = None) -> Array: ...

class rs:
    """The kernels written in Rust (kernels/rust), same contract as the top-level ones."""

    @staticmethod
    def vecadd(a: ArrayLike, b: ArrayLike, *, out: Optional[ArrayLike] = None, stream: StreamLike = None) -> Array: ...
    @staticmethod
    def silu_mul(gate: ArrayLike, up: ArrayLike, *, out: Optional[ArrayLike] = None, stream: StreamLike = None) -> Array: ...
    @staticmethod
    def rmsnorm(
        x: ArrayLike, weight: ArrayLike, eps: float = 1e-6, *, out: Optional[ArrayLike] = None, stream: StreamLike = None
    ) -> Array: ...
    @staticmethod
    def softmax(x: ArrayLike, *, out: Optional[ArrayLike] = None, stream: StreamLike = None) -> Array: ...

def rope(
    x: ArrayLike, positions: Optional[ArrayLike] = None, *, offset: int = 0, theta: float = 10000.0,
    out: Optional[ArrayLike] = None, stream: StreamLike = None,
) -> Array: ...
def embedding(table: ArrayLike, ids: ArrayLike, *, out: Optional[ArrayLike] = None, stream: StreamLike = None) -> Array:
    """Returns a new kiln.Array, or `out` itself when given (likewise for every op with out=)."""
def embedding_checked(table: ArrayLike, ids: ArrayLike, *, stream: StreamLike = None) -> Array: ...
def copy(x: ArrayLike, *, stream: StreamLike = None) -> Array: ...
def asarray(x: ArrayLike, device: Optional[int] = None, *, stream: StreamLike = None) -> Array: ...
def matmul(a: ArrayLike, b: ArrayLike, *, stream: StreamLike = None) -> Array: ...
def cudnn_softmax(x: ArrayLike, *, stream: StreamLike = None) -> Array: ...
def all_reduce_sum(inputs: Sequence[ArrayLike]) -> List[Array]: ...
def device_count() -> int:
    """0 without a driver or a device."""
def synchronize(device: int = 0) -> None: ...
def device_info(device: int = 0) -> Dict[str, Union[int, str, Tuple[int, int]]]: ...
