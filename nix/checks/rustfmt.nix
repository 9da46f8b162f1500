# rustfmt --check over the workspace.
{ crates }:
crates.craneLib.cargoFmt {
  inherit (crates) src;
  inherit (crates.commonArgs) pname version;
}
