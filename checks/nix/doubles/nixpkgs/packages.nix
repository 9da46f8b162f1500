# The packages of the nixpkgs double, generated from facts.toml (the facts about the locked
# nixpkgs revision): every versioned attribute kiln uses, with the version, outputs, licence
# (unfree), platforms (meta.available) and propagated outputs recorded there. Only the builders
# and the few scalar attributes come from here; no version is written in this file.
{ lib, system, config, mk, facts }:
let
  # "cudaPackages_13_0.cudnn" -> a derivation at [ "cudaPackages_13_0" "cudnn" ].
  rowToValue = path: row:
    if row ? value then row.value
    else
      mk {
        pname = lib.last path;
        inherit (row) version outputs;
        meta = {
          # nixpkgs' shape: meta.license.free, meta.platforms (meta.available is derived).
          license = { free = !row.unfree; };
          inherit (row) platforms;
          mainProgram = lib.last path;
        };
        passthru = {
          propagatedBuildOutputs = row.propagated or [ ];
          setupHookExports = row.setup-hook or [ ];
        };
      };

  fromFacts = builtins.foldl'
    (acc: name:
      let path = lib.splitString "." name; in
      lib.recursiveUpdate acc (lib.setAttrByPath path (rowToValue path facts.attr.${name})))
    { }
    (builtins.attrNames facts.attr);

  stdenv = {
    mkDerivation = mk;
    hostPlatform = { inherit system; };
    buildPlatform = { inherit system; };
  };

  llvmPackages_21 = fromFacts.llvmPackages_21 // {
    clang-unwrapped = fromFacts.llvmPackages_21.libclang;
  };
in
fromFacts // {
  inherit lib config stdenv system llvmPackages_21;
  cudaPackages_13_0 = fromFacts.cudaPackages_13_0 // {
    cudaMajorVersion = lib.versions.major fromFacts.cudaPackages_13_0.cudaMajorMinorVersion;
  };

  mkShell = { name ? "nix-shell", packages ? [ ], nativeBuildInputs ? [ ], ... }@args:
    mk (builtins.removeAttrs args [ "packages" ] // {
      inherit name;
      nativeBuildInputs = packages ++ nativeBuildInputs;
    });

  symlinkJoin = { name, paths, ... }@args:
    if !builtins.isList paths then throw "symlinkJoin: `paths` must be a list"
    else mk (args // { inherit name; });

  runCommand = name: env: buildCommand: mk (env // { inherit name buildCommand; });

  writeShellApplication = { name, text, runtimeInputs ? [ ], ... }@args:
    mk (builtins.removeAttrs args [ "runtimeInputs" ] // {
      inherit name text runtimeInputs;
      meta = (args.meta or { }) // { mainProgram = name; };
    });

  writeShellScriptBin = name: text: mk {
    inherit name text;
    meta.mainProgram = name;
  };
}
