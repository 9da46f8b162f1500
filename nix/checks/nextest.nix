# The workspace's tests under cargo-nextest (no GPU in the build sandbox: GPU tests skip
# themselves when no driver is present). xtask is left out: its tests drive Nix itself and
# install tools, which the sandbox cannot do; `cargo xtask nix-check` and CI run them.
{ crates }:
crates.craneLib.cargoNextest (crates.finalArgs // {
  cargoNextestExtraArgs = "--workspace --exclude xtask --no-tests=warn";
  partitions = 1;
  partitionType = "count";
})
