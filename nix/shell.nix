# The dev shell: the pinned toolchain, the variables bindgen and nvcc need, and the host's
# driver found at entry (never the toolkit's stub); `extraPackages` from kiln.lib's mkDevShell.
{ pkgs, toolchain, cuda, driverHook, extraPackages ? [ ] }:
# Fatbins uncompressed as in every kiln derivation (nix/fatbin-compression.nix): the shell's
# builds then write what `nix build` and the non-Nix route write, and kiln-build's cache keys
# (which hold NIX_CUDA_DONT_COMPRESS_FATBINS) are the derivations' own.
pkgs.mkShell (import ./fatbin-compression.nix // {
  name = "kiln";
  packages = [
    toolchain.rust
    toolchain.llvm.clang
    cuda.home
    cuda.cuda_nvcc
    pkgs.maturin
    cuda.cuda_cuobjdump
    pkgs.cargo-nextest
    pkgs.python3
    pkgs.zig
    pkgs.nixpkgs-fmt
  ] ++ extraPackages;
  buildInputs = [ cuda.cudnn cuda.nccl ];

  LIBCLANG_PATH = toolchain.libclangPath;
  KILN_KERNEL_RUSTC = toolchain.kernelRustc;
  BINDGEN_EXTRA_CLANG_ARGS = "-resource-dir=${toolchain.clangResourceDir}";
  CUDA_HOME = cuda.home;
  CUDA_PATH = cuda.home;
  KILN_CUDNN_LIB = "${pkgs.lib.getLib cuda.cudnn}/lib";
  KILN_NCCL_LIB = "${pkgs.lib.getLib cuda.nccl}/lib";
  # The exact releases the locked nixpkgs gave (the doctor reports them beside the pins).
  inherit (cuda.versions) KILN_NIX_NVCC_VERSION KILN_NIX_CUDNN_VERSION KILN_NIX_NCCL_VERSION;

  shellHook = ''
    export BINDGEN_EXTRA_CLANG_ARGS="$BINDGEN_EXTRA_CLANG_ARGS $(< ${toolchain.libcCflagsFile})"
  '' + driverHook;
})
