# rustfmt --check over the workspace.
{ crates }:
crates.craneLib.cargoFmt {
  inherit (crates) src;
  pname = "kiln";
  version = "0.1.0";
}
