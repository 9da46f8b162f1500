# rustfmt --check over the workspace.
{ crates }:
crates.craneLib.cargoFmt {
  src = crates.withRustfmt;
  inherit (crates.commonArgs) pname version;
}
