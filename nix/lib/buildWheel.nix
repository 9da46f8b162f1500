# kiln.lib.<system>.buildWheel { src }: a project's PyO3 wheel, built as kiln builds its own: crane
# (the pinned nightly, the project's Cargo.lock vendored, a dependency-only build cached apart),
# kiln-build in build.rs compiling the project's kernels/ for the matrix of its own
# [package.metadata.kiln], maturin with zig for the manylinux level. Gate it with auditCheck.
#
# kiln-build comes from this kiln, through the path the project's Cargo.toml already names
# (the template's `kiln-build = { path = "../../crates/kiln-build" }`): the build tree is laid
# out so that this relative path leads into kiln's source (see `layout` below). Nothing edits
# Cargo.toml or Cargo.lock at build time, so `--locked` checks the project's own lock: a Cargo.lock
# records a path dependency by name, version and dependencies only, never by its path.
{ pkgs, crates }:
{ src
, manylinux ? "manylinux_2_34"
}:
let
  manifest = builtins.fromTOML (builtins.readFile (src + "/Cargo.toml"));
  inherit (manifest) package;
  inherit (crates) craneLib commonArgs;

  # --- Where kiln-build's path leads -------------------------------------------------------
  # The declared path, `../` d times then R `crates/kiln-build` (R a relative directory, maybe
  # empty). In the sandbox the project is unpacked to $NIX_BUILD_TOP/<name>, so that path would
  # leave the build directory; postUnpack moves it to kiln-layout/<projectDir>, d levels below
  # kiln-layout/, and links kiln's root Cargo.toml (kiln-build inherits its package fields and
  # dependencies from kiln's [workspace]) and crates/ into kiln-layout/R. When R is empty, the
  # project sits inside kiln's workspace directory, so it must be at a path kiln's workspace
  # excludes: checks/consumer (where the template lives in kiln, two levels down).
  declared =
    let dep = (manifest.build-dependencies or { }).kiln-build or null; in
    if builtins.isAttrs dep && dep ? path then dep.path
    else throw "kiln buildWheel: ${package.name}'s Cargo.toml must name kiln-build as a path build-dependency, e.g. `kiln-build = { path = \"../../crates/kiln-build\" }` (the template's); buildWheel points that path at this kiln";
  parts = builtins.filter (p: p != "" && p != ".") (builtins.filter builtins.isString (builtins.split "/" declared));
  nParts = builtins.length parts;
  ups = builtins.length (builtins.filter (p: p == "..") parts);
  rest = builtins.genList (i: builtins.elemAt parts (ups + i)) (nParts - ups);
  nRest = builtins.length rest;
  kilnDir = builtins.concatStringsSep "/" (builtins.genList (builtins.elemAt rest) (nRest - 2));
  pathForm = "a relative path `../` (one or more times), then an optional directory, then `crates/kiln-build`";
  layout =
    if builtins.substring 0 1 declared == "/" then
      throw "kiln buildWheel: kiln-build's path \"${declared}\" is absolute, which no build sandbox has; use ${pathForm} (the template's is ../../crates/kiln-build)"
    else if ups == 0 || nRest < 2 || builtins.genList (builtins.elemAt parts) ups != builtins.genList (_: "..") ups
      || builtins.elem ".." rest || builtins.elemAt rest (nRest - 2) != "crates" || builtins.elemAt rest (nRest - 1) != "kiln-build" then
      throw "kiln buildWheel: kiln-build's path \"${declared}\" is not ${pathForm}"
    else if kilnDir == "" then
      (if ups == 2 then { inherit kilnDir; projectDir = "checks/consumer"; }
      else throw "kiln buildWheel: kiln-build's path \"${declared}\" puts the project ${toString ups} level(s) inside kiln's workspace directory, where only checks/consumer (../../crates/kiln-build) is excluded from kiln's workspace; use ../../crates/kiln-build or a path through a directory of its own, e.g. ../kiln/crates/kiln-build")
    else {
      inherit kilnDir;
      projectDir = builtins.concatStringsSep "/" (builtins.genList (_: "kiln-project") ups);
    };

  # --- Vendored crates.io sources -----------------------------------------------------------
  # The project's lock (its own crates and kiln-build's: bindgen & co.), and with Rust kernels
  # their own lock (kernels/rust/Cargo.lock), as nix/crates.nix does for kiln. The nightly has
  # the nvptx64 `core` prebuilt, so kiln-build compiles no standard library and needs none of
  # its crates. Both are files of `src`, read by crane at evaluation: no import from derivation.
  hasRustKernels = builtins.pathExists (src + "/kernels/rust/Cargo.lock");
  cargoVendorDir = craneLib.vendorMultipleCargoDeps {
    cargoLockList = [ (src + "/Cargo.lock") ]
      ++ (if hasRustKernels then [ (src + "/kernels/rust/Cargo.lock") ] else [ ]);
  };

  # maturin --zig builds under target/<triple>/; the dependency build names the same target, so
  # its artifacts are the ones maturin's cargo finds.
  triple = {
    x86_64-linux = "x86_64-unknown-linux-gnu";
    aarch64-linux = "aarch64-unknown-linux-gnu";
  }.${pkgs.stdenv.hostPlatform.system} or (throw "kiln buildWheel: no Rust target triple for ${pkgs.stdenv.hostPlatform.system}");

  # What both derivations get: the same source layout, vendored sources and build environment.
  common = {
    inherit src cargoVendorDir;
    pname = "${package.name}-wheel";
    inherit (package) version;
    strictDeps = true;
    # nvcc, CUDA_HOME, libclang for bindgen, the kernel rustc, uncompressed fatbins (kiln-build's
    # flags decide, as without Nix): what kiln's own derivations get. Not KILN_CUDA_CAPABILITIES:
    # the project's matrix is its own [package.metadata.kiln].
    inherit (commonArgs) CUDA_HOME CUDA_PATH LIBCLANG_PATH KILN_KERNEL_RUSTC BINDGEN_EXTRA_CLANG_ARGS
      dontCompressFatbin dontCompressCudaFatbins NIX_CUDA_DONT_COMPRESS_FATBINS preBuild;
    nativeBuildInputs = commonArgs.nativeBuildInputs ++ [ pkgs.maturin pkgs.zig ];
    # kiln's source, linked into the layout by postUnpack (an environment variable, so the
    # string below names no store path).
    kilnSrc = crates.src;
    kilnLayoutDir = layout.kilnDir;
    kilnProjectDir = layout.projectDir;
    # After unpacking (cwd $NIX_BUILD_TOP, the project in $sourceRoot) and before patchPhase,
    # whose postPatchHooks are where crane sets CARGO_HOME and restores cargoArtifacts. stdenv
    # cd's into $sourceRoot after unpackPhase, so the build runs in the moved project.
    postUnpack = ''
      mkdir -p "kiln-layout/$kilnLayoutDir" "kiln-layout/$(dirname "$kilnProjectDir")"
      ln -s "$kilnSrc/Cargo.toml" "kiln-layout/$kilnLayoutDir/Cargo.toml"
      ln -s "$kilnSrc/crates" "kiln-layout/$kilnLayoutDir/crates"
      mv "$sourceRoot" "kiln-layout/$kilnProjectDir"
      sourceRoot="kiln-layout/$kilnProjectDir"
    '';
  };

  # maturin itself: the same command for the dependency build and the wheel. cargo hashes the
  # target linker (maturin --zig's cargo-zigbuild wrapper) into every unit's fingerprint, so
  # only a dependency build made by this maturin command is reused by it (nix/wheel.nix says
  # what was measured).
  maturinBuild = ''
    export XDG_CACHE_HOME="$TMPDIR/xdg-cache" ZIG_GLOBAL_CACHE_DIR="$TMPDIR/zig-cache"
    maturin build --release --offline --locked --target ${triple} --zig --compatibility ${manylinux} --out dist
  '';

  # crane's dependency-only build over the project's dummied sources: kiln-build (a path
  # dependency outside the project, so real sources) and every crates.io crate, built by
  # maturin for its target and linker (the dummy wheel is left behind). No tests: maturin runs
  # none, and a pyo3 test binary would want libpython.
  cargoArtifacts = craneLib.buildDepsOnly (common // {
    doCheck = false;
    buildPhaseCargoCommand = maturinBuild;
  });
in
craneLib.mkCargoDerivation (common // {
  inherit cargoArtifacts;
  doInstallCargoArtifacts = false;
  NIX_DONT_SET_RPATH = true;
  buildPhaseCargoCommand = maturinBuild;
  installPhaseCommand = ''
    mkdir -p $out
    cp dist/*.whl $out/
  '';
})
