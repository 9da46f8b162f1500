# The Python wheel, as `cargo xtask wheel` makes it without Nix: maturin over crates/kiln-py,
# tagged manylinux_2_34 (MANYLINUX in crates/xtask/src/wheel.rs), with Requires-Dist for the
# NVIDIA runtime wheels taken from Cargo.toml [workspace.metadata.kiln.runtime] for each default
# feature of kiln-py: the declared range (`requires`), not the exact pin. It builds on crane's
# dependency-only build, so a change to kiln's own code rebuilds (and re-downloads) no
# dependency. The build step itself is nix/wheel-build.sh, which CI runs without Nix too.
{ pkgs, pins, crates, root }:
let
  inherit (pkgs) lib;
  manylinux = "manylinux_2_34";

  kilnPy = builtins.fromTOML (builtins.readFile (root + "/crates/kiln-py/Cargo.toml"));
  runtimeFeatures = builtins.filter (f: pins.runtime ? ${f}) kilnPy.features.default;
  requiresDist = map (f: "${pins.runtime.${f}.wheel}${pins.runtime.${f}.requires}") runtimeFeatures;
in
assert lib.assertMsg (requiresDist != [ ])
  "kiln: no default feature of crates/kiln-py names a [workspace.metadata.kiln.runtime] library";
# One maturin release for both routes: PyPI's (cargo xtask) and nixpkgs' (here).
assert lib.assertMsg (pkgs.maturin.version == pins.maturin)
  "kiln: nixpkgs has maturin ${pkgs.maturin.version}, but Cargo.toml pins maturin = \"${pins.maturin}\" (the PyPI route installs that one); pin the release the locked nixpkgs has";
crates.craneLib.mkCargoDerivation (crates.finalArgs // {
  pname = "kiln-wheel";
  nativeBuildInputs = crates.commonArgs.nativeBuildInputs ++ [ pkgs.maturin pkgs.zig ];
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
