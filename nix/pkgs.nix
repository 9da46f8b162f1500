# One nixpkgs instance per system: CUDA enabled for exactly the arch matrix, unfree NVIDIA
# redistributables allowed, and rust-overlay's `rust-bin` on top.
{ nixpkgs, rust-overlay, pins }:
system:
let
  cuda = import ./arch.nix pins.archs;
in
import nixpkgs {
  inherit system;
  config = {
    allowUnfree = true;
    cudaSupport = true;
    inherit (cuda) cudaCapabilities cudaForwardCompat;
  };
  overlays = [ rust-overlay.overlays.default ];
}
