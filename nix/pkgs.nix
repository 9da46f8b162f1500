# One nixpkgs instance per system: unfree NVIDIA redistributables allowed, rust-overlay's
# `rust-bin` on top, and nixpkgs' DEFAULT CUDA configuration. The arch matrix is deliberately
# not put into the global config: a custom `cudaCapabilities` changes every from-source CUDA
# package (NCCL among them) into a local rebuild that no binary cache holds. Only kiln's own
# derivations get the matrix (nix/crates.nix: kiln-build reads it from Cargo.toml).
{ nixpkgs, rust-overlay }:
system:
import nixpkgs {
  inherit system;
  config.allowUnfree = true;
  overlays = [ rust-overlay.overlays.default ];
}
