# The workspace built with crane: one dependency-only build shared by every package and check,
# then the `kiln` CLI and the kernels on top of it.
{ pkgs, crane, pins, toolchain, cuda, root, buildInfo, driverHook }:
let
  inherit (pkgs) lib;
  craneLib = (crane.mkLib pkgs).overrideToolchain toolchain.rust;
  fatbinCompression = import ./fatbin-compression.nix;

  inherit (import ./source.nix {
    inherit lib root;
    inherit (craneLib.fileset) commonCargoSources;
  }) src withRustfmt;

  # The arch matrix in nixpkgs' terms, for kiln's derivations only (never nixpkgs' global
  # config: see nix/pkgs.nix). kiln-build reads the matrix from Cargo.toml itself; this records
  # it and refuses a matrix nixpkgs' CUDA conventions could not express.
  arch = import ./arch.nix pins.archs;

  # The sandbox has no network: every crates.io source any cargo run needs, vendored by crane
  # from the workspace's lockfile and kernels/rust's (its own workspace, built by kiln-build).
  # No standard-library lockfile: the nightly's prebuilt nvptx64 `core` is used, so kiln-build
  # passes no -Zbuild-std (checks/nix/README.md). crane writes the source replacement to
  # $CARGO_HOME/config.toml, and kiln-build's kernel cargo keeps CARGO_HOME, so it sees it too.
  cargoVendorDir = craneLib.vendorMultipleCargoDeps {
    cargoLockList = [
      (root + "/Cargo.lock")
      (root + "/kernels/rust/Cargo.lock")
    ];
  };

  # What every cargo invocation needs: nvcc and the toolkit (CUDA_HOME), libclang 21 for
  # bindgen, and the pinned versions so kiln-build can refuse anything else. No cuDNN or NCCL:
  # nothing links them (cudarc opens them at run time); they are in the dev shell only.
  commonArgs = fatbinCompression // {
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
    preBuild = ''
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

  # One derivation per kernel job, planned at evaluation (nix/kernel-jobs.nix).
  kernelJobs = import ./kernel-jobs.nix { inherit pkgs pins cuda root craneLib toolchain cargoVendorDir fatbinCompression; };
  # What every output that builds kiln-kernels adds (the kernels, the wheel, clippy, nextest):
  # each job's output from its derivation; kiln-build checks every key against its own plan,
  # refuses a mismatch, and only combines (crates/kiln-build/src/prebuilt.rs).
  withPrebuiltKernels = { KILN_PREBUILT_KERNELS = kernelJobs.prebuilt; };
in
{
  inherit craneLib src withRustfmt commonArgs cargoArtifacts finalArgs cargoVendorDir buildInfo kernelJobs withPrebuiltKernels;

  # `nix run .#kiln -- doctor` on any host: the dev shell's driver discovery (nix/driver-hook.sh:
  # NixOS' /run/opengl-driver/lib, the host's ldconfig cache, the usual distribution and
  # container paths; never the toolkit's stub) runs before the binary.
  kiln = pkgs.writeShellScriptBin "kiln" ''
    ${driverHook}
    exec ${kilnUnwrapped}/bin/kiln "$@"
  '';

  # The fatbin(s) and the build manifest that kiln-kernels' build script writes to OUT_DIR.
  kernels = craneLib.mkCargoDerivation (finalArgs // buildInfo // withPrebuiltKernels // {
    pname = "kiln-kernels";
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
