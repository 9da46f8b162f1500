# The part of torch's public typing kiln's stubs use, for type-checking kiln where torch is not
# installed (CI: torch with its CUDA wheels is several GB). Taken from torch 2.11's own
# annotations: torch/_tensor.py `Tensor.__dlpack_device__(self) -> tuple[enum.IntEnum, int]`.
# With torch installed, mypy reads the real torch and this directory is not on MYPYPATH.
import enum

class Tensor:
    def __dlpack_device__(self) -> tuple[enum.IntEnum, int]: ...
    def __add__(self, other: Tensor) -> Tensor: ...
