# The workspace's tests under cargo-nextest (no GPU in the build sandbox: GPU tests skip
# themselves when no driver is present).
{ crates }:
crates.craneLib.cargoNextest (crates.finalArgs // {
  cargoNextestExtraArgs = "--workspace --no-tests=warn";
  partitions = 1;
  partitionType = "count";
})
