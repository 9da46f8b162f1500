# The Python wheel, as `cargo xtask wheel` makes it without Nix: maturin over crates/kiln-py,
# tagged with the manylinux level of Cargo.toml [workspace.metadata.kiln.wheel], then the same
# post-processing step as xtask (`kiln wheel finalize`: Requires-Dist for the NVIDIA runtime
# wheels of [workspace.metadata.kiln.runtime] named by kiln-py's default features, the SBOM's
# runtime components, RECORD). It builds on crane's dependency-only build, so a change to kiln's
# own code rebuilds (and re-downloads) no dependency. The build step itself is
# nix/wheel-build.sh, which CI runs without Nix too (`cargo xtask sandbox`).
{ pkgs, pins, crates, root }:
let
  inherit (pkgs) lib;
  inherit (pins.wheel) manylinux;

  kilnPy = builtins.fromTOML (builtins.readFile (root + "/crates/kiln-py/Cargo.toml"));
  runtimeFeatures = builtins.filter (f: pins.runtime ? ${f}) kilnPy.features.default;
  requiresDist = map (f: "${pins.runtime.${f}.wheel}${pins.runtime.${f}.requires}") runtimeFeatures;
in
assert lib.assertMsg (requiresDist != [ ])
  "kiln: no default feature of crates/kiln-py names a [workspace.metadata.kiln.runtime] library";
# One maturin release for both routes: PyPI's (cargo xtask) and nixpkgs' (here).
assert lib.assertMsg (pkgs.maturin.version == pins.maturin)
  "kiln: nixpkgs has maturin ${pkgs.maturin.version}, but Cargo.toml pins maturin = \"${pins.maturin}\" (the PyPI route installs that one); pin the release the locked nixpkgs has";
let
  # maturin --zig's own dependency build: nix/wheel-build.sh (maturin only, under
  # CRANE_BUILD_DEPS_ONLY) over crane's dummied sources. The workspace's dependency build
  # (crates.cargoArtifacts, plain `cargo build`) cannot serve maturin: it builds under
  # target/release, maturin --zig under target/<triple>/release, and cargo hashes the target
  # linker (cargo-zigbuild's wrapper) into every unit's fingerprint, so even a `--target` build
  # without maturin's linker leaves 102 of 127 units dirty (`ConfigSettingsChanged`). Measured
  # without Nix (checks/nix/README.md, "maturin and crane's dependency build"): maturin over dummied sources
  # compiled 79 units, then maturin over the real sources compiled only the 8 workspace crates.
  wheelDeps = crates.craneLib.buildDepsOnly (crates.commonArgs // {
    pname = "kiln-wheel";
    nativeBuildInputs = crates.commonArgs.nativeBuildInputs ++ [ pkgs.maturin pkgs.zig ];
    doCheck = false;
    inherit manylinux;
    buildPhaseCargoCommand = "bash ${./wheel-build.sh}";
  });
in
# The kernels: every job from its own derivation (crates.withPrebuiltKernels), combined here.
crates.craneLib.mkCargoDerivation (crates.finalArgs // crates.buildInfo // crates.withPrebuiltKernels // {
  pname = "kiln-wheel";
  cargoArtifacts = wheelDeps;
  # crates.kiln: `kiln wheel finalize` in nix/wheel-build.sh (the CLI built once, not again here).
  nativeBuildInputs = crates.commonArgs.nativeBuildInputs ++ [ pkgs.maturin pkgs.zig crates.kiln ];
  NIX_DONT_SET_RPATH = true;
  doInstallCargoArtifacts = false;
  requiresDist = builtins.toJSON requiresDist;
  inherit manylinux;
  buildPhaseCargoCommand = "bash ${./wheel-build.sh}";
  installPhaseCommand = ''
    mkdir -p $out
    cp dist/*.whl $out/
  '';
  passthru = { inherit requiresDist manylinux; };
})
