# The packages of the nixpkgs double, generated from facts.toml (the facts about the locked
# nixpkgs revision): every attribute kiln uses, with exactly the columns facts.toml cites
# (version, outputs, licence, platforms, propagated outputs). A column facts.toml does not
# assert is not modelled: no `version` attribute (reading it fails), the default single `out`
# output, no licence and no platform restriction. A makeSetupHook package has a name and no
# version, as in nixpkgs. Only the builders and the few scalar attributes come from here; no
# version is written in this file.
{ lib, system, config, mk, facts }:
let
  # "cudaPackages_13_0.cudnn" -> a derivation at [ "cudaPackages_13_0" "cudnn" ].
  rowToValue = path: row:
    if row ? value then row.value
    else
      mk ({
        meta = {
          # nixpkgs' shape: meta.license.free, meta.platforms (meta.available is derived).
          mainProgram = lib.last path;
        }
        // (if row ? unfree then { license = { free = !row.unfree; }; } else { })
        // (if row ? platforms then { inherit (row) platforms; } else { });
        passthru = {
          propagatedBuildOutputs = row.propagated or [ ];
        };
      }
      // (if row ? version then { pname = lib.last path; inherit (row) version; }
      else if (row.made-by or null) == "makeSetupHook" then { inherit (row) name; }
      # Nobody checked the version: the derivation is named without one (and has none).
      else { name = lib.last path; })
      // (if row ? outputs then { inherit (row) outputs; } else { }));

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

  # pkgs/build-support/docker/default.nix: streamLayeredImage's arguments (a closed set there
  # too; the real one takes a few more this flake does not use, which fail here), `created`
  # fixed to 1970-01-01T00:00:01Z unless given, and a derivation named stream-<name> (the script
  # that streams the tarball) with imageName/imageTag in passthru.
  dockerTools.streamLayeredImage =
    { name
    , tag ? null
    , fromImage ? null
    , contents ? [ ]
    , config ? { }
    , architecture ? null
    , created ? "1970-01-01T00:00:01Z"
    , maxLayers ? 100
    , extraCommands ? ""
    , fakeRootCommands ? ""
    , includeStorePaths ? true
    , passthru ? { }
    }:
    if !builtins.isList contents then throw "dockerTools.streamLayeredImage: `contents` must be a list in this flake's use"
    else if maxLayers <= 1 then throw "the maxLayers argument of dockerTools.buildLayeredImage function must be greather than 1"
    else
      mk {
        name = "stream-${baseNameOf name}";
        inherit contents created extraCommands fakeRootCommands;
        configJson = builtins.toJSON { inherit config architecture; fromImage = if fromImage == null then null else "${fromImage}"; includeStorePaths = includeStorePaths; maxLayers = maxLayers; };
        passthru = passthru // { imageName = name; imageTag = tag; };
      };

  # pkgs/build-support/closure-info.nix: `closureInfo { rootPaths }`, a derivation holding
  # `store-paths` (every path of the closure) and `registration`.
  closureInfo = { rootPaths }: mk { name = "closure-info"; inherit rootPaths; };

  writeShellScriptBin = name: text: mk {
    inherit name text;
    meta.mainProgram = name;
  };
}
