# Uncompressed fatbins whichever nvcc hook the locked nixpkgs has: kiln-build's flag table
# decides compression, as without Nix, so both routes write the same fatbin bytes (and the
# golden tests that read them see what they see outside Nix). Set on every derivation that runs
# nvcc and on the dev shell. NIX_CUDA_DONT_COMPRESS_FATBINS is in kiln-build's job key
# (crates/kiln-build/src/jobs.rs NVCC_ENV): it changes what the wrapped nvcc writes.
{
  # The older hook, pkgs/development/cuda-modules/packages/setupCudaHook/setup-cuda-hook.sh
  # (setupCUDAToolkitCompilers, a preConfigureHook): `appendToVar NVCC_PREPEND_FLAGS
  # "-Xfatbin=-compress-all"` unless `dontCompressFatbin` is set.
  dontCompressFatbin = true;
  # The newer one, pkgs/development/cuda-modules/packages/cuda_nvcc/setup-hook.sh: exports
  # NIX_CUDA_DONT_COMPRESS_FATBINS="${dontCompressCudaFatbins-${dontCompressFatbin-}}",
  # overwriting a value set directly.
  dontCompressCudaFatbins = true;
  # What pkgs/development/cuda-modules/packages/cuda_nvcc/nvcc-wrapper.sh reads:
  # `[[ -n ${NIX_CUDA_DONT_COMPRESS_FATBINS-} ]] || set -- -Xfatbin=-compress-all "$@"`.
  NIX_CUDA_DONT_COMPRESS_FATBINS = "1";
}
