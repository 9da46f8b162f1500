# The pinned compilers: the Rust nightly from rust-overlay and clang/libclang from nixpkgs.
{ pkgs, pins }:
let
  inherit (pkgs) lib;
  nightlies = pkgs.rust-bin.nightly;
  rust =
    if nightlies ? ${pins.nightly} then
    # `minimal` (rustc, cargo, rust-std) plus exactly what kiln uses: the `default` profile
    # would add rust-docs to every derivation's closure.
      nightlies.${pins.nightly}.minimal.override
        {
          # rust-src and the nvptx64 target: kernels/rust (-Zbuild-std=core); the bitcode
          # linker links nvptx64 crates (kiln-build itself takes the PTX from --emit=asm).
          extensions = [ "rust-src" "clippy" "rustfmt" "llvm-bitcode-linker-preview" ];
          targets = [ "nvptx64-nvidia-cuda" ];
        }
    else
      throw "kiln: rust-nightly = \"${pins.nightly}\" (Cargo.toml [workspace.metadata.kiln.toolchain]) is not in the locked rust-overlay; pick a date its manifests/nightly/ lists, or update the rust-overlay input (nix flake update rust-overlay)";

  llvm =
    pkgs.${pins.llvmPackagesAttr}
      or (throw "kiln: clang-major = ${pins.clangMajor} wants ${pins.llvmPackagesAttr}, which the locked nixpkgs lacks");
  libclang =
    if lib.versions.major llvm.libclang.version == pins.clangMajor then llvm.libclang
    else throw "kiln: ${pins.llvmPackagesAttr}.libclang is ${llvm.libclang.version}, not clang ${pins.clangMajor}";
in
rec {
  inherit rust llvm libclang;
  # The kernel rustc kiln-build uses for kernels/rust: this nightly (matched against rust-nightly).
  kernelRustc = "${rust}/bin/rustc";
  # The standard library's lockfile for this nightly: `-Zbuild-std=core` resolves core's
  # crates.io dependencies from it, so the sandbox must have them vendored (nix/crates.nix).
  # crane reads it at evaluation time, so it is a committed file (nix/std-lock/README.md): the
  # copy inside the toolchain would be import-from-derivation. The two are compared at build
  # time (stdCargoLockCheck, checks.std-lock).
  stdCargoLock =
    let committed = ./std-lock + "/${pins.nightly}.Cargo.lock"; in
    if builtins.pathExists committed then committed
    else throw "kiln: no nix/std-lock/${pins.nightly}.Cargo.lock for rust-nightly = \"${pins.nightly}\" (Cargo.toml); copy the nightly's lib/rustlib/src/rust/library/Cargo.lock there (nix/std-lock/README.md)";
  stdCargoLockOfToolchain = "${rust}/lib/rustlib/src/rust/library/Cargo.lock";
  # Shell for build time, where the toolchain exists: stop (with the fix) when the committed
  # lock is not this nightly's own, before cargo fails on a missing vendored crate.
  stdCargoLockCheck = ''
    if ! cmp -s ${stdCargoLock} ${stdCargoLockOfToolchain}; then
      echo "kiln: nix/std-lock/${pins.nightly}.Cargo.lock is not the standard library lockfile of rust-nightly ${pins.nightly}; replace it with the toolchain's:" >&2
      echo "  cp ${stdCargoLockOfToolchain} nix/std-lock/${pins.nightly}.Cargo.lock" >&2
      diff -u ${stdCargoLock} ${stdCargoLockOfToolchain} | head -n 40 >&2 || true
      exit 1
    fi
  '';
  # bindgen: libclang itself, and the resource dir that belongs to it (its own stddef.h & co).
  libclangPath = "${libclang.lib}/lib";
  clangResourceDir = "${llvm.clang}/resource-root";
  # The C library headers the wrapped clang would use; read at build time from the wrapper.
  libcCflagsFile = "${llvm.clang}/nix-support/libc-cflags";
}
