# The strict nixpkgs double, plus the nixpkgs attributes that the REAL rust-overlay's overlay
# reads (its lib functions, callPackage, fetchurl and the stdenv/platform facts of
# mk-component-set.nix and mk-aggregated.nix). Used only by `cargo xtask nix-check
# --real-crane … --real-rust-overlay …`, to evaluate the pinned nightly through the real
# overlay; the normal check uses the strict double alone.
{ system, config ? { }, overlays ? [ ] }:
import ../../doubles/nixpkgs {
  inherit system config;
  overlays = [ (import ./overlay.nix) ] ++ overlays;
}
