# The workspace's tests under cargo-nextest (no GPU in the build sandbox: GPU tests skip
# themselves when no driver is present). xtask is left out: its tests drive Nix itself and
# install tools, which the sandbox cannot do; `cargo xtask nix-check` and CI run them.
# cuobjdump (the fatbin tests' independent cross-check) is found through PATH, as outside Nix.
# `cargo xtask test --only sandbox` runs the same tests the same way without Nix.
{ crates, cuda }:
# kiln-kernels' build script takes every kernel job from its derivation (it only combines);
# kiln-build's own tests build their fixtures with an environment of their own, never this one.
crates.craneLib.cargoNextest (crates.finalArgs // crates.withPrebuiltKernels // {
  nativeBuildInputs = crates.finalArgs.nativeBuildInputs ++ [ cuda.cuda_cuobjdump ];
  cargoNextestExtraArgs = "--workspace --exclude xtask --no-tests=warn";
  partitions = 1;
  partitionType = "count";
})
