# The source set every crate derivation builds from: cargo's files as crane keeps them
# (`commonCargoSources`: Cargo.toml, Cargo.lock, *.rs and every *.toml), plus what build scripts
# and tests read (the CUDA kernels, everything under crates/ and tools/ — the workspace's tooling
# members, which clippy and cargo's lockfile resolution need — checks/ fixtures, the wheel step).
# Left out, so editing them rebuilds nothing: the flake's own checks and test doubles
# (checks/nix, whose facts.toml crane's *.toml rule would otherwise keep), the committed std
# locks (read by Nix, not by cargo), the fuzz crate (not a workspace member) and rustfmt.toml
# (only the rustfmt check reads it: `withRustfmt`).
# A function of lib and crane's commonCargoSources only, so a test can give it the real ones
# (tools/xtask/tests/nix_source.rs) and compare the store path with the doubles'.
{ lib, commonCargoSources, root }:
let
  built = lib.fileset.difference
    (lib.fileset.unions [
      (commonCargoSources root)
      (root + "/crates")
      (lib.fileset.maybeMissing (root + "/tools"))
      (lib.fileset.maybeMissing (root + "/kernels"))
      (lib.fileset.maybeMissing (root + "/checks"))
      # The wheel's build step and the derivation that runs it: crates/kiln/tests/wheel_finalize.rs
      # reads both to prove the Nix route and the xtask route finalize the same wheel.
      (root + "/nix/wheel-build.sh")
      # kiln-audit's rule test requires every rule id to be documented there; the kiln CLI's
      # test requires the committed schema to be what `kiln audit --json-schema` prints.
      (lib.fileset.maybeMissing (root + "/docs/audit-json-schema.md"))
      (lib.fileset.maybeMissing (root + "/docs/audit-json-schema.json"))
      (root + "/nix/wheel.nix")
    ])
    (lib.fileset.unions [
      (lib.fileset.maybeMissing (root + "/checks/nix"))
      (lib.fileset.maybeMissing (root + "/fuzz"))
      (lib.fileset.maybeMissing (root + "/rustfmt.toml"))
    ]);
in
{
  src = lib.fileset.toSource { inherit root; fileset = built; };
  withRustfmt = lib.fileset.toSource {
    inherit root;
    fileset = lib.fileset.unions [ built (lib.fileset.maybeMissing (root + "/rustfmt.toml")) ];
  };
}
