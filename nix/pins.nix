# The pins and the arch matrix, read from Cargo.toml `[workspace.metadata.kiln]` — the single
# source of truth that `cargo xtask bootstrap`, kiln-build and `kiln audit` read as well.
# Nothing here restates a version: every value is derived from that table.
{ cargoToml }:
let
  workspace = (builtins.fromTOML (builtins.readFile cargoToml)).workspace;
  kiln = workspace.metadata.kiln;
  tc = kiln.toolchain;
  need = name: tc.${name} or (throw "kiln: Cargo.toml [workspace.metadata.kiln.toolchain] has no `${name}`");
  majorMinor = v: builtins.concatStringsSep "." (builtins.genList (builtins.elemAt (builtins.splitVersion v)) 2);
in
{
  inherit (kiln) archs;
  # The workspace version ([workspace.package]), for the derivations' names.
  inherit (workspace.package) version;
  minDriver = kiln.min-driver;
  runtime = kiln.runtime or { };
  # manylinux level and the Requires-Dist rule's extension crate (`kiln wheel finalize` applies it).
  wheel = kiln.wheel or (throw "kiln: Cargo.toml has no [workspace.metadata.kiln.wheel]");
  cuda = need "cuda";
  cudaMajorMinor = majorMinor (need "cuda");
  # nixpkgs names its CUDA sets by major.minor: 13.0.2 -> cudaPackages_13_0.
  cudaPackagesAttr = "cudaPackages_" + builtins.replaceStrings [ "." ] [ "_" ] (majorMinor (need "cuda"));
  nvcc = need "nvcc";
  clangMajor = toString (need "clang-major");
  llvmPackagesAttr = "llvmPackages_${toString (need "clang-major")}";
  nightly = need "rust-nightly";
  maturin = need "maturin";
}
