# kiln.lib.<system>.buildWheel { src }: a project's PyO3 wheel, built as kiln builds its own: crane
# (the pinned nightly, the project's Cargo.lock vendored), kiln-build in build.rs compiling the
# project's kernels/ for the matrix of its own [package.metadata.kiln], maturin with zig for the
# manylinux level. Gate it with auditCheck.
{ pkgs, crates }:
{ src
, manylinux ? "manylinux_2_34"
}:
let
  package = (builtins.fromTOML (builtins.readFile (src + "/Cargo.toml"))).package;
  inherit (crates) craneLib commonArgs;
in
craneLib.mkCargoDerivation {
  inherit src;
  pname = "${package.name}-wheel";
  inherit (package) version;
  cargoArtifacts = null;
  doInstallCargoArtifacts = false;
  strictDeps = true;
  cargoVendorDir = craneLib.vendorMultipleCargoDeps { cargoLockList = [ (src + "/Cargo.lock") ]; };
  # nvcc, CUDA_HOME, libclang for bindgen, the kernel rustc: what kiln's own derivations get.
  inherit (commonArgs) CUDA_HOME CUDA_PATH LIBCLANG_PATH KILN_KERNEL_RUSTC BINDGEN_EXTRA_CLANG_ARGS preBuild;
  nativeBuildInputs = commonArgs.nativeBuildInputs ++ [ pkgs.maturin pkgs.zig ];
  NIX_DONT_SET_RPATH = true;
  # kiln-build (and the pins it reads) from this kiln, whatever path the project's Cargo.toml
  # names: the `cargo add` step README documents for the route without Nix.
  postPatch = ''
    cargo add --offline --build kiln-build --path ${crates.src}/crates/kiln-build
  '';
  buildPhaseCargoCommand = ''
    export XDG_CACHE_HOME="$TMPDIR/xdg-cache" ZIG_GLOBAL_CACHE_DIR="$TMPDIR/zig-cache"
    maturin build --release --offline --locked --zig --compatibility ${manylinux} --out dist
  '';
  installPhaseCommand = ''
    mkdir -p $out
    cp dist/*.whl $out/
  '';
}
