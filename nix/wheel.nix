# The Python wheel: maturin over crates/kiln-py, on top of crane's dependency-only build, so a
# change to kiln's own code does not rebuild (or re-download) a single dependency.
{ pkgs, pins, crates }:
let
  inherit (pkgs) lib;
  maturin = lib.warnIf (lib.versions.majorMinor pkgs.maturin.version != lib.versions.majorMinor pins.maturin)
    "kiln: nixpkgs has maturin ${pkgs.maturin.version}, Cargo.toml pins ${pins.maturin}"
    pkgs.maturin;
in
crates.craneLib.mkCargoDerivation (crates.commonArgs // {
  inherit (crates) cargoArtifacts;
  pname = "kiln-wheel";
  # The extension is linked by zig against an old glibc (manylinux2014, as the non-Nix build
  # does), never against the Nix store's glibc: no /nix/store RUNPATH and no GLIBC_ symbol
  # newer than the platform tag can end up in the wheel.
  nativeBuildInputs = crates.commonArgs.nativeBuildInputs ++ [ maturin pkgs.zig ];
  NIX_DONT_SET_RPATH = true;
  doInstallCargoArtifacts = false;
  buildPhaseCargoCommand = ''
    export ZIG_GLOBAL_CACHE_DIR=$TMPDIR/zig-cache
    maturin build --release --offline --locked \
      -m crates/kiln-py/Cargo.toml \
      --zig --compatibility manylinux2014 --out dist
  '';
  installPhaseCommand = ''
    mkdir -p $out
    cp dist/*.whl $out/
  '';
  passthru.pins = pins;
})
