# Compares the test doubles with the REAL crane and rust-overlay sources (never committed; pass
# unpacked `git archive`s of the locked revisions). Without nixpkgs nothing of crane or
# rust-overlay can be instantiated, so this evaluates what can be evaluated for real:
#   - crane: its flake's `mkLib`, the names in its lib scope, and the argument patterns of the
#     functions kiln calls (required arguments must match the double's exactly; every argument
#     the double accepts must exist in crane);
#   - rust-overlay: its flake's `overlays.default`, that the pinned nightly date is one of its
#     manifests, that this date's manifest has the components kiln asks for, and that the
#     double lists exactly the same dates.
# Returns a list of problems; [ ] means the doubles match the real sources on all of the above.
{ crane, rustOverlay, doubles, cargoToml }:
let
  pins = import ../../nix/pins.nix { inherit cargoToml; };
  inherit (builtins) attrNames filter functionArgs map elem concatMap;

  # Just enough of a `lib` for crane's lib/default.nix to return its scope lazily.
  fakeLib = {
    warnIf = _: _: x: x;
    optionalAttrs = c: s: if c then s else { };
  };

  # --- crane ---------------------------------------------------------------------------
  craneFlake = (import "${crane}/flake.nix").outputs { };
  craneScope = import "${crane}/lib/default.nix" {
    lib = fakeLib;
    stdenv = { };
    splicePackages = _: { };
    makeScopeWithSplicing' = { f, ... }: f craneSelf;
    pkgsBuildBuild = { };
    pkgsBuildHost = { };
    pkgsBuildTarget = { };
    pkgsHostHost = { };
    pkgsHostTarget = { };
    pkgsTargetTarget = { };
  };
  craneSelf = craneScope // { callPackage = _: _: null; };

  doubleCrane = import "${doubles}/crane/lib.nix" { pkgs = import "${doubles}/nixpkgs" { system = "x86_64-linux"; }; };
  craneFunctions = [ "buildDepsOnly" "buildPackage" "cargoClippy" "cargoFmt" "cargoNextest" "mkCargoDerivation" "vendorMultipleCargoDeps" ];

  realInner = name:
    let outer = import "${crane}/lib/${name}.nix"; in
    outer (builtins.mapAttrs (_: _: null) (functionArgs outer));
  argProblems = name:
    let
      real = functionArgs (realInner name);
      dbl = functionArgs doubleCrane.${name};
      required = s: filter (n: !s.${n}) (attrNames s);
    in
    (if required real != required dbl then
      [ "crane.${name}: required arguments differ: real ${builtins.toJSON (required real)}, double ${builtins.toJSON (required dbl)}" ]
    else [ ])
    ++ map (n: "crane.${name}: the double accepts `${n}`, crane does not") (filter (n: !(real ? ${n})) (attrNames dbl));

  craneProblems =
    (if craneFlake ? mkLib then [ ] else [ "crane: flake has no mkLib" ])
    ++ map (n: "crane: the double has `${n}`, crane's lib scope does not")
      (filter (n: !(craneScope ? ${n})) (attrNames doubleCrane))
    ++ map (n: "crane: the double has fileset.${n}, crane does not")
      (filter (n: !(craneScope.fileset ? ${n})) (attrNames doubleCrane.fileset))
    ++ concatMap argProblems craneFunctions;

  # --- rust-overlay --------------------------------------------------------------------
  roFlake = (import "${rustOverlay}/flake.nix").outputs { self = { }; nixpkgs = { lib = fakeLib; }; };
  realDates = filter (d: d != "latest") (attrNames (import "${rustOverlay}/manifests/nightly/default.nix"));
  doubleDates = filter (l: builtins.isString l && l != "" && builtins.substring 0 1 l != "#")
    (builtins.split "\n" (builtins.readFile "${doubles}/rust-overlay/nightly-dates.txt"));
  manifest = import "${rustOverlay}/manifests/nightly/${builtins.substring 0 4 pins.nightly}/${pins.nightly}.nix";
  renames = builtins.elemAt (import "${rustOverlay}/manifests/renames.nix") manifest.r;
  profiles = builtins.elemAt (import "${rustOverlay}/manifests/profiles.nix") manifest.p;
  hasComponent = c: manifest ? ${c} || renames ? ${c};
  wanted = [ "rust-src" "clippy" "rustfmt" ];

  rustOverlayProblems =
    (if roFlake ? overlays.default then [ ] else [ "rust-overlay: flake has no overlays.default" ])
    ++ (if elem pins.nightly realDates then [ ] else [ "rust-overlay: nightly ${pins.nightly} is not in manifests/nightly" ])
    ++ (if realDates == doubleDates then [ ] else [ "rust-overlay: the double's nightly-dates.txt differs from the real manifests/nightly (${toString (builtins.length realDates)} real, ${toString (builtins.length doubleDates)} in the double)" ])
    ++ (if profiles ? default then [ ] else [ "rust-overlay: nightly ${pins.nightly} has no `default` profile" ])
    ++ map (c: "rust-overlay: nightly ${pins.nightly} has no component ${c}") (filter (c: !(elem pins.nightly realDates) || !hasComponent c) wanted);
in
craneProblems ++ rustOverlayProblems
