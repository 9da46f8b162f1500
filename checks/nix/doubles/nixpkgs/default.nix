# `import nixpkgs { system; config; overlays; }` of the nixpkgs test double.
{ system, config ? { }, overlays ? [ ] }:
let
  lib = import ./lib.nix;

  # nixpkgs' config options kiln sets; an unknown key is an error here (a misspelt key is
  # silently ignored by real nixpkgs' freeform config, which is worse).
  knownConfig = [ "allowUnfree" "cudaSupport" "cudaCapabilities" "cudaForwardCompat" ];
  unknownConfig = builtins.filter (k: !builtins.elem k knownConfig) (builtins.attrNames config);

  # nixpkgs' CUDA capability database (_cuda.db), restricted to what CUDA 13.0 supports.
  cuda13Capabilities = [
    "7.5"
    "8.0"
    "8.6"
    "8.7"
    "8.9"
    "9.0"
    "9.0a"
    "10.0"
    "10.0a"
    "10.0f"
    "10.3"
    "10.3a"
    "10.3f"
    "11.0"
    "11.0a"
    "11.0f"
    "12.0"
    "12.0a"
    "12.0f"
    "12.1"
    "12.1a"
    "12.1f"
  ];
  knownCapabilities = cuda13Capabilities ++ [ "5.0" "5.2" "5.3" "6.0" "6.1" "6.2" "7.0" "7.2" "10.1" "10.1a" "10.1f" ];
  requested = config.cudaCapabilities or [ ];
  unrecognized = builtins.filter (c: !builtins.elem c knownCapabilities) requested;
  unsupported = builtins.filter (c: !builtins.elem c cuda13Capabilities) requested;

  mk = import ./derivation.nix { inherit lib system config; };
  facts = builtins.fromTOML (builtins.readFile ./facts.toml);

  base = _final: import ./packages.nix { inherit lib system config mk facts; };

  pkgs = lib.fix (final: builtins.foldl' (acc: overlay: acc // overlay final acc) (base final) overlays);
in
if unknownConfig != [ ] then throw "nixpkgs double: unknown config option(s) ${builtins.toJSON unknownConfig}"
else if unrecognized != [ ] then throw "Unrecognized CUDA capabilities: ${builtins.toJSON unrecognized}"
else if unsupported != [ ] then throw "Unsupported CUDA capabilities: ${builtins.toJSON unsupported}"
else if !(builtins.isBool (config.cudaForwardCompat or true)) then throw "config.cudaForwardCompat must be a bool"
else pkgs
