# CUDA from nixpkgs' cudaPackages_<major>_<minor>, with cuDNN and NCCL, checked against the pins.
#
# Exact versions are what flake.lock fixes (and checks/nix/doubles/nixpkgs/facts.toml records);
# evaluation asserts only what the ABI needs: nvcc the exact release kiln-build accepts, and
# for cuDNN/NCCL the range Cargo.toml declares ([workspace.metadata.kiln.runtime.<lib>]
# `requires`: the soname major, from the oldest supported minor). The exact versions it got
# are passed on (`versions`) to the dev shell and the doctor.
{ pkgs, pins }:
let
  inherit (pkgs) lib;
  cudaPackages =
    pkgs.${pins.cudaPackagesAttr}
      or (throw "kiln: cuda = \"${pins.cuda}\" wants ${pins.cudaPackagesAttr}, which the locked nixpkgs lacks");

  # NCCL versions carry a packaging suffix in nixpkgs ("2.30.7-1").
  release = v: builtins.head (lib.splitString "-" v);

  withinAbi = what: drv:
    let
      lib' = pins.runtime.${what} or (throw "kiln: Cargo.toml has no [workspace.metadata.kiln.runtime.${what}]");
      m = builtins.match ">=([0-9]+)\\.([0-9]+) *, *<([0-9]+)" lib'.requires;
      low = "${builtins.elemAt m 0}.${builtins.elemAt m 1}";
      high = builtins.elemAt m 2;
      got = release drv.version;
    in
    if m == null then throw "kiln: runtime.${what}.requires = \"${lib'.requires}\" is not \">=MAJOR.MINOR,<MAJOR+1\""
    else if lib.versionOlder got low || !(lib.versionOlder got high) then
      throw "kiln: ${pins.cudaPackagesAttr}.${what} is ${drv.version}, outside the ABI range Cargo.toml declares for it (requires = \"${lib'.requires}\", exact pin ${lib'.version}); change [workspace.metadata.kiln.runtime.${what}] in Cargo.toml or the nixpkgs lock"
    else drv;

  toolkitParts = [
    cudaPackages.cuda_nvcc
    cudaPackages.cuda_cudart
    cudaPackages.cuda_cccl
    cudaPackages.cuda_crt
    cudaPackages.libnvvm
  ];

  # Every output of the toolkit parts except the driver stubs: cuda_cudart's `stubs` output
  # holds a fake libcuda.so(.1) for linking only, which must never be found at run time, so it
  # is kept out of CUDA_HOME altogether.
  outputsOf = drv: map (o: drv.${o}) (lib.remove "stubs" drv.outputs);

  cudnn = withinAbi "cudnn" cudaPackages.cudnn;
  nccl = withinAbi "nccl" cudaPackages.nccl;
in
assert lib.assertMsg (cudaPackages.cuda_nvcc.version == pins.nvcc)
  "kiln: ${pins.cudaPackagesAttr}.cuda_nvcc is ${cudaPackages.cuda_nvcc.version}, but Cargo.toml pins nvcc = \"${pins.nvcc}\" (kiln-build refuses any other)";
assert lib.assertMsg (cudaPackages.cudaMajorMinorVersion == pins.cudaMajorMinor)
  "kiln: ${pins.cudaPackagesAttr} is CUDA ${cudaPackages.cudaMajorMinorVersion}, not ${pins.cudaMajorMinor}";
{
  inherit cudaPackages cudnn nccl;
  inherit (cudaPackages) cuda_nvcc cuda_cuobjdump;

  # The exact releases this nixpkgs gave, for the dev shell's environment and `kiln doctor`.
  versions = {
    KILN_NIX_NVCC_VERSION = cudaPackages.cuda_nvcc.version;
    KILN_NIX_CUDNN_VERSION = cudnn.version;
    KILN_NIX_NCCL_VERSION = release nccl.version;
  };

  # One directory with bin/nvcc, include/, lib/ and nvvm/: what CUDA_HOME means to nvcc and to
  # kiln-build.
  # Only files: the parts' nix-support/ (setup hooks, propagated inputs, among them cuda_cudart's
  # stubs) stays out; whoever needs nvcc's setup hook takes cuda_nvcc itself.
  home = pkgs.symlinkJoin {
    name = "cuda-home-${cudaPackages.cudaMajorMinorVersion}";
    paths = lib.concatMap outputsOf toolkitParts;
    postBuild = "rm -rf $out/nix-support";
  };
}
