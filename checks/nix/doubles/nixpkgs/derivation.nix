# stdenv.mkDerivation of the double: a real `builtins.derivation` (so drvPath works and every
# string context is checked) that can never be built. As in nixpkgs (check-meta.nix), a package
# whose licence is unfree is refused unless config.allowUnfree, and one whose meta.platforms
# lacks the system is unavailable: both throw when the derivation is used (drvPath/outPath),
# not when an attribute such as `version` is read.
{ lib, system, config }:
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
  unfree = !((args.meta or { }).license.free or true);
  onPlatform = !((args.meta or { }) ? platforms) || builtins.elem system args.meta.platforms;
  meta = (args.meta or { }) // { available = onPlatform && (!unfree || (config.allowUnfree or false)); };
  refusal =
    if unfree && !(config.allowUnfree or false) then
      "Package ‘${name}’ in the nixpkgs double has an unfree license, refusing to evaluate (set config.allowUnfree = true)"
    else if !onPlatform then
      "Package ‘${name}’ in the nixpkgs double is not available on the requested hostPlatform ${system} (meta.platforms: ${builtins.toJSON meta.platforms})"
    else null;
  guard = d: if refusal == null then d else d // { drvPath = throw refusal; outPath = throw refusal; };
  drv = derivation (builtins.removeAttrs args notEnv // (args.env or { }) // {
    inherit name system outputs;
    builder = "/bin/sh";
    args = [ "-c" "echo 'kiln nixpkgs test double: evaluation only' >&2; exit 1" ];
  });
  # `version` only where one is known: given, or part of the name ("foo-1.2"). A name without
  # one (a makeSetupHook package, an attribute whose version nobody checked) has no `version`.
  version = args.version or (builtins.parseDrvName name).version;
  attach = d: guard d // (args.passthru or { }) // (if version != "" then { inherit version; } else { }) // {
    inherit meta;
    inherit outputs;
    pname = args.pname or (builtins.parseDrvName name).name;
    overrideAttrs = f: import ./derivation.nix { inherit lib system config; } (args // f args);
  };
  withOutputs = attach drv // lib.genAttrs outputs (o: attach drv.${o});
in
withOutputs
