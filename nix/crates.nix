# The workspace built with crane: one dependency-only build shared by every package and check,
# then the `kiln` CLI and the kernels on top of it.
{ pkgs, crane, pins, toolchain, cuda, root, buildInfo, driverHook }:
let
  inherit (pkgs) lib;
  craneLib = (crane.mkLib pkgs).overrideToolchain toolchain.rust;

  inherit (import ./source.nix {
    inherit lib root;
    inherit (craneLib.fileset) commonCargoSources;
  }) src withRustfmt;

  # The arch matrix in nixpkgs' terms, for kiln's derivations only (never nixpkgs' global
  # config: see nix/pkgs.nix). kiln-build reads the matrix from Cargo.toml itself; this records
  # it and refuses a matrix nixpkgs' CUDA conventions could not express.
  arch = import ./arch.nix pins.archs;

  # The sandbox has no network: every crates.io source any cargo run needs, vendored by crane
  # from three lockfiles. The workspace's; kernels/rust's (its own workspace, built by
  # kiln-kernels' build script); and the pinned nightly's standard library, whose dependencies
  # `-Zbuild-std=core` resolves for the nvptx64 kernels. crane writes the source replacement to
  # $CARGO_HOME/config.toml, and kiln-build's kernel cargo keeps CARGO_HOME, so it sees it too.
  cargoVendorDir = craneLib.vendorMultipleCargoDeps {
    cargoLockList = [
      (root + "/Cargo.lock")
      (root + "/kernels/rust/Cargo.lock")
      toolchain.stdCargoLock
    ];
  };

  # What every cargo invocation needs: nvcc and the toolkit (CUDA_HOME), libclang 21 for
  # bindgen, and the pinned versions so kiln-build can refuse anything else. No cuDNN or NCCL:
  # nothing links them (cudarc opens them at run time); they are in the dev shell only.
  commonArgs = {
    inherit src cargoVendorDir;
    pname = "kiln";
    inherit (pins) version;
    strictDeps = true;
    # cuda_nvcc itself for its setup hook (nvcc's host compiler, as nixpkgs wires it).
    nativeBuildInputs = [ cuda.home cuda.cuda_nvcc pkgs.python3 ];
    KILN_CUDA_CAPABILITIES = builtins.concatStringsSep ";" arch.cudaCapabilities;
    CUDA_HOME = cuda.home;
    CUDA_PATH = cuda.home;
    LIBCLANG_PATH = toolchain.libclangPath;
    KILN_KERNEL_RUSTC = toolchain.kernelRustc;
    BINDGEN_EXTRA_CLANG_ARGS = "-resource-dir=${toolchain.clangResourceDir}";
    # nixpkgs' nvcc wrapper adds -Xfatbin=-compress-all unless NIX_CUDA_DONT_COMPRESS_FATBINS
    # is set, and cuda_nvcc's setup hook exports that variable from `dontCompressCudaFatbins`
    # (overwriting one set directly), so both are set. kiln-build's flag table decides the
    # fatbin's compression, as without Nix: the same fatbin bytes on both routes, and the
    # tests that read them (kiln-audit tests/golden.rs) see what they see outside Nix.
    dontCompressCudaFatbins = true;
    NIX_CUDA_DONT_COMPRESS_FATBINS = "1";
    preBuild = toolchain.stdCargoLockCheck + ''
      export BINDGEN_EXTRA_CLANG_ARGS="$BINDGEN_EXTRA_CLANG_ARGS $(< ${toolchain.libcCflagsFile})"
    '';
  };

  # --workspace: the Cargo.toml's default-members are the product crates only; the dependency
  # build covers tools/ too, since the clippy check (and nextest, less xtask) run on the workspace.
  cargoArtifacts = craneLib.buildDepsOnly (commonArgs // { cargoExtraArgs = "--locked --workspace"; });

  # What every derivation on top of the dependency build gets. The commit (buildInfo, for the
  # kernels' build manifest: a Nix build has no .git) goes only to the derivations that ship a
  # manifest (the kernels here, the wheel in nix/wheel.nix), so a new commit rebuilds those and
  # nothing else: not the dependencies, the CLI, clippy or the tests.
  finalArgs = commonArgs // { inherit cargoArtifacts; };

  kilnUnwrapped = craneLib.buildPackage (finalArgs // {
    pname = "kiln-cli";
    cargoExtraArgs = "--locked -p kiln";
    doCheck = false;
    # NixOS: /run/opengl-driver/lib in the binary's RUNPATH, where cudarc's dlopen of libcuda
    # then looks.
    nativeBuildInputs = finalArgs.nativeBuildInputs ++ [ pkgs.autoAddDriverRunpath ];
    meta.mainProgram = "kiln";
  });

  # One derivation per kernel compile job, planned at evaluation (nix/kernel-jobs.nix).
  kernelJobs = import ./kernel-jobs.nix { inherit pkgs pins cuda root craneLib finalArgs; };
in
{
  inherit craneLib src withRustfmt commonArgs cargoArtifacts finalArgs cargoVendorDir buildInfo kernelJobs;

  # `nix run .#kiln -- doctor` on any host: the dev shell's driver discovery (nix/driver-hook.sh:
  # NixOS' /run/opengl-driver/lib, the host's ldconfig cache, the usual distribution and
  # container paths; never the toolkit's stub) runs before the binary.
  kiln = pkgs.writeShellScriptBin "kiln" ''
    ${driverHook}
    exec ${kilnUnwrapped}/bin/kiln "$@"
  '';

  # The fatbin(s) and the build manifest that kiln-kernels' build script writes to OUT_DIR.
  kernels = craneLib.mkCargoDerivation (finalArgs // buildInfo // {
    pname = "kiln-kernels";
    # Every compile job from its own derivation; kiln-build checks each one's key against its
    # plan, refuses a mismatch, and links and combines them (crates/kiln-build/src/prebuilt.rs).
    KILN_PREBUILT_KERNELS = kernelJobs.prebuilt;
    doInstallCargoArtifacts = false;
    buildPhaseCargoCommand = "cargo build --release --locked -p kiln-kernels";
    installPhaseCommand = ''
      dest=$out/share/kiln/kernels
      mkdir -p $dest
      for d in ''${CARGO_TARGET_DIR:-target}/release/build/kiln-kernels-*/out; do
        [ -f "$d/kernels.fatbin" ] || continue
        cp "$d"/kernels.fatbin "$d"/kernels.manifest.json "$d"/kernels.summary.json $dest/
        cp "$d"/*.rs $dest/ 2>/dev/null || true
      done
      test -f $dest/kernels.fatbin
    '';
  });
}
