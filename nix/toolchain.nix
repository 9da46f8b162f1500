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
          # The nvptx64 target's prebuilt rust-std: kiln-build builds kernels/rust against its
          # `core`, with no -Zbuild-std and so no standard-library lockfile. rust-src is for
          # rust-analyzer in the dev shell; the bitcode linker links nvptx64 crates (kiln-build
          # itself takes the PTX from --emit=asm).
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
  # bindgen: libclang itself, and the resource dir that belongs to it (its own stddef.h & co).
  libclangPath = "${libclang.lib}/lib";
  clangResourceDir = "${llvm.clang}/resource-root";
  # The C library headers the wrapped clang would use; read at build time from the wrapper.
  libcCflagsFile = "${llvm.clang}/nix-support/libc-cflags";
}
