# The Python wheel, as `cargo xtask wheel` makes it without Nix: maturin over crates/kiln-py,
# tagged with the manylinux level of Cargo.toml [workspace.metadata.kiln.wheel], then the same
# post-processing step as xtask (`kiln wheel finalize`: Requires-Dist for the NVIDIA runtime
# wheels of [workspace.metadata.kiln.runtime] named by kiln-py's default features, the SBOM's
# runtime components, RECORD). It builds on crane's dependency-only build, so a change to kiln's
# own code rebuilds (and re-downloads) no dependency.
{ pkgs, pins, crates, root }:
let
  inherit (pkgs) lib;
  inherit (pins.wheel) manylinux;

  kilnPy = builtins.fromTOML (builtins.readFile (root + "/crates/kiln-py/Cargo.toml"));
  runtimeFeatures = builtins.filter (f: pins.runtime ? ${f}) kilnPy.features.default;
  requiresDist = map (f: "${pins.runtime.${f}.wheel}==${pins.runtime.${f}.version}") runtimeFeatures;

  maturin =
    lib.warnIf (lib.versions.majorMinor pkgs.maturin.version != lib.versions.majorMinor pins.maturin)
      "kiln: nixpkgs has maturin ${pkgs.maturin.version}, Cargo.toml pins ${pins.maturin}"
      pkgs.maturin;
in
assert lib.assertMsg (requiresDist != [ ])
  "kiln: no default feature of crates/kiln-py names a [workspace.metadata.kiln.runtime] library";
crates.craneLib.mkCargoDerivation (crates.finalArgs // {
  pname = "kiln-wheel";
  # zig links the extension against glibc 2.34's symbol versions, not the Nix store's newer
  # glibc, and leaves no /nix/store RUNPATH: the wheel holds what its manylinux tag promises.
  nativeBuildInputs = crates.commonArgs.nativeBuildInputs ++ [ maturin pkgs.zig ];
  NIX_DONT_SET_RPATH = true;
  doInstallCargoArtifacts = false;
  buildPhaseCargoCommand = ''
    export ZIG_GLOBAL_CACHE_DIR=$TMPDIR/zig-cache
    maturin build --release --offline --locked \
      --manifest-path crates/kiln-py/Cargo.toml \
      --zig --compatibility ${manylinux} --out raw
    # The post-processing step `cargo xtask wheel` runs too (crates/kiln-wheel/src/finalize.rs).
    cargo run --release --offline --locked -p kiln -- \
      wheel finalize raw/*.whl --pins Cargo.toml --out dist
  '';
  installPhaseCommand = ''
    mkdir -p $out
    cp dist/*.whl $out/
  '';
  passthru = { inherit requiresDist manylinux; };
})
