# The Python wheel, as `cargo xtask wheel` makes it without Nix: maturin over crates/kiln-py,
# tagged manylinux_2_34 (MANYLINUX in crates/xtask/src/wheel.rs), with Requires-Dist for the
# NVIDIA runtime wheels taken from Cargo.toml [workspace.metadata.kiln.runtime] for each default
# feature of kiln-py. It builds on crane's dependency-only build, so a change to kiln's own code
# rebuilds (and re-downloads) no dependency.
{ pkgs, pins, crates, root }:
let
  inherit (pkgs) lib;
  manylinux = "manylinux_2_34";

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
  requiresDist = builtins.toJSON requiresDist;
  buildPhaseCargoCommand = ''
    # maturin writes Requires-Dist only from pyproject's [project] dependencies.
    sed -i "/^\[project\]$/a dependencies = $requiresDist" crates/kiln-py/pyproject.toml
    export ZIG_GLOBAL_CACHE_DIR=$TMPDIR/zig-cache
    maturin build --release --offline --locked \
      --manifest-path crates/kiln-py/Cargo.toml \
      --zig --compatibility ${manylinux} --out dist
  '';
  installPhaseCommand = ''
    mkdir -p $out
    cp dist/*.whl $out/
  '';
  passthru = { inherit requiresDist manylinux; };
})
