# The packages of the nixpkgs double: exactly those kiln uses, with nixpkgs' attribute names,
# outputs and versions of the pinned nixpkgs revision where known.
{ lib, system, config, mk }:
let
  pkg = pname: version: extra: mk ({ inherit pname version; } // extra);
  withBin = pname: version: mainProgram: pkg pname version { meta.mainProgram = mainProgram; };

  stdenv = {
    mkDerivation = mk;
    hostPlatform = { inherit system; };
    buildPlatform = { inherit system; };
  };

  cudaPackages_13_0 =
    let
      redist = pname: version: outputs: pkg pname version { inherit outputs; };
    in
    {
      cudaMajorMinorVersion = "13.0";
      cudaMajorVersion = "13";
      cuda_nvcc = redist "cuda_nvcc" "13.0.88" [ "out" "bin" "dev" "include" "static" ];
      cuda_cudart = redist "cuda_cudart" "13.0.96" [ "out" "dev" "include" "lib" "static" "stubs" ];
      cuda_cccl = redist "cuda_cccl" "13.0.85" [ "out" "dev" "include" ];
      cuda_crt = redist "cuda_crt" "13.0.88" [ "out" "include" ];
      libnvvm = redist "libnvvm" "13.0.88" [ "out" "bin" ];
      cudnn = redist "cudnn" "9.27.0.42" [ "out" "dev" "include" "lib" "static" ];
      nccl = redist "nccl" "2.30.7-1" [ "out" "dev" "static" ];
    };

  llvmPackages_21 =
    let
      clang-unwrapped = pkg "clang" "21.1.8" { outputs = [ "out" "lib" "dev" "python" ]; };
    in
    {
      inherit clang-unwrapped;
      libclang = clang-unwrapped;
      clang = pkg "clang-wrapper" "21.1.8" { passthru.cc = clang-unwrapped; };
    };
in
{
  inherit lib config stdenv system;
  inherit cudaPackages_13_0 llvmPackages_21;
  cudaPackages = cudaPackages_13_0;

  mkShell = { name ? "nix-shell", packages ? [ ], nativeBuildInputs ? [ ], ... }@args:
    mk (builtins.removeAttrs args [ "packages" ] // {
      inherit name;
      nativeBuildInputs = packages ++ nativeBuildInputs;
    });

  symlinkJoin = { name, paths, ... }@args:
    if !builtins.isList paths then throw "symlinkJoin: `paths` must be a list"
    else mk (args // { inherit name; });

  runCommand = name: env: buildCommand: mk (env // { inherit name buildCommand; });

  writeShellApplication = { name, text, runtimeInputs ? [ ], ... }@args:
    mk (builtins.removeAttrs args [ "runtimeInputs" ] // {
      inherit name text runtimeInputs;
      meta = (args.meta or { }) // { mainProgram = name; };
    });

  python3 = withBin "python3" "3.13.6" "python3";
  maturin = withBin "maturin" "1.16.0" "maturin";
  zig = withBin "zig" "0.15.1" "zig";
  cargo-nextest = withBin "cargo-nextest" "0.9.110" "cargo-nextest";
  nixpkgs-fmt = withBin "nixpkgs-fmt" "1.3.0" "nixpkgs-fmt";
  findutils = withBin "findutils" "4.10.0" "find";
  git = withBin "git" "2.50.1" "git";
  rsync = withBin "rsync" "3.4.1" "rsync";
  zstd = withBin "zstd" "1.5.7" "zstd";
}
