# stdenv.mkDerivation of the double: a real `builtins.derivation` (so drvPath works and every
# string context is checked) that can never be built.
{ lib, system }:
let
  notEnv = [ "passthru" "meta" "env" "outputs" "pname" "version" "name" ];
in
args:
let
  name = args.name or (
    if args ? pname && args ? version then "${args.pname}-${args.version}"
    else throw "mkDerivation: neither `name` nor `pname` and `version` are set"
  );
  outputs = args.outputs or [ "out" ];
  drv = derivation (builtins.removeAttrs args notEnv // (args.env or { }) // {
    inherit name system outputs;
    builder = "/bin/sh";
    args = [ "-c" "echo 'kiln nixpkgs test double: evaluation only' >&2; exit 1" ];
  });
  attach = d: d // (args.passthru or { }) // {
    meta = args.meta or { };
    inherit outputs;
    version = args.version or (builtins.parseDrvName name).version;
    pname = args.pname or (builtins.parseDrvName name).name;
    overrideAttrs = f: import ./derivation.nix { inherit lib system; } (args // f args);
  };
  withOutputs = attach drv // lib.genAttrs outputs (o: attach drv.${o});
in
withOutputs
