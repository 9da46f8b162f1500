# kiln.lib.<system>.mkDevShell { extraPackages }: kiln's dev shell (the pinned nightly, clang 21,
# CUDA 13.0 with cuDNN and NCCL, maturin, the host's driver found at entry) plus a project's own
# tools. The shell itself is nix/shell.nix, the one kiln develops in.
{ pkgs, toolchain, cuda, driverHook }:
{ extraPackages ? [ ] }:
import ../shell.nix { inherit pkgs toolchain cuda driverHook extraPackages; }
