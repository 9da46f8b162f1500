# clippy over the whole workspace, every target, warnings denied.
{ crates }:
crates.craneLib.cargoClippy (crates.finalArgs // {
  cargoClippyExtraArgs = "--workspace --all-targets -- --deny warnings";
})
