# The machine-checkable columns of checks/nix/doubles/nixpkgs/facts.toml, evaluated from a
# nixpkgs source tree: the REAL nixpkgs at the locked revision on a networked machine
# (.github/workflows/nix.yml), the test double on every `cargo xtask nix-check` run. Returns,
# per attribute listed in the facts file: version (or value; null where the attribute has no
# `version`, as a makeSetupHook package has none), name, outputs, unfree, the systems where
# meta.available holds, and the propagated build outputs. Every column is evaluated for every
# row; nix-check compares only the columns facts.toml cites. `cargo xtask nix-check
# --evaluated-facts FILE` compares that with the committed facts and names every difference.
{ nixpkgs, facts ? ./doubles/nixpkgs/facts.toml }:
let
  rows = (builtins.fromTOML (builtins.readFile facts)).attr;
  systems = [ "x86_64-linux" "aarch64-linux" ];
  pkgsFor = system: import nixpkgs { inherit system; config.allowUnfree = true; };
  all = builtins.listToAttrs (map (s: { name = s; value = pkgsFor s; }) systems);
  at = pkgs: name: builtins.foldl' (a: k: a.${k}) pkgs (builtins.filter builtins.isString (builtins.split "\\." name));
  licences = l: if builtins.isList l then l else [ l ];
  describe = name:
    let
      v = at all.x86_64-linux name;
    in
    if !(builtins.isAttrs v) then { value = v; }
    else {
      version = v.version or null;
      name = v.name or null;
      outputs = v.outputs or [ "out" ];
      unfree = builtins.any (l: !(l.free or true)) (licences (v.meta.license or [ ]));
      platforms = builtins.filter (s: (at all.${s} name).meta.available or false) systems;
      propagated = v.propagatedBuildOutputs or [ ];
    };
in
builtins.mapAttrs (name: _: describe name) rows
