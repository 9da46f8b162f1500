# clippy over the whole workspace, every target, warnings denied.
{ crates }:
crates.craneLib.cargoClippy (crates.commonArgs // {
  inherit (crates) cargoArtifacts;
  cargoClippyExtraArgs = "--workspace --all-targets -- --deny warnings";
})
