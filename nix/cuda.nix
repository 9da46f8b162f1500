# CUDA from nixpkgs' cudaPackages_<major>_<minor>, with cuDNN and NCCL, checked against the pins.
{ pkgs, pins }:
let
  inherit (pkgs) lib;
  cudaPackages =
    pkgs.${pins.cudaPackagesAttr}
      or (throw "kiln: cuda = \"${pins.cuda}\" wants ${pins.cudaPackagesAttr}, which the locked nixpkgs lacks");

  checkVersion = what: pin: drv:
    if lib.versions.majorMinor drv.version == pin then drv
    else throw "kiln: ${pins.cudaPackagesAttr}.${what} is ${drv.version}, but Cargo.toml pins ${what} = \"${pin}\"";

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
in
assert lib.assertMsg (cudaPackages.cuda_nvcc.version == pins.nvcc)
  "kiln: ${pins.cudaPackagesAttr}.cuda_nvcc is ${cudaPackages.cuda_nvcc.version}, but Cargo.toml pins nvcc = \"${pins.nvcc}\" (kiln-build refuses any other)";
assert lib.assertMsg (cudaPackages.cudaMajorMinorVersion == pins.cudaMajorMinor)
  "kiln: ${pins.cudaPackagesAttr} is CUDA ${cudaPackages.cudaMajorMinorVersion}, not ${pins.cudaMajorMinor}";
{
  inherit cudaPackages;
  cudnn = checkVersion "cudnn" pins.cudnn cudaPackages.cudnn;
  nccl = checkVersion "nccl" pins.nccl cudaPackages.nccl;
  inherit (cudaPackages) cuda_nvcc;

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
