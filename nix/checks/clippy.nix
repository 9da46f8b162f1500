# clippy over the whole workspace, every target, warnings denied.
{ crates }:
# kiln-kernels' build script takes every kernel job from its derivation (it only combines).
crates.craneLib.cargoClippy (crates.finalArgs // crates.withPrebuiltKernels // {
  cargoClippyExtraArgs = "--workspace --all-targets -- --deny warnings";
})
