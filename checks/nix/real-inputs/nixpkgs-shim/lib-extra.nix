# nixpkgs lib functions the real rust-overlay uses, written from their documented semantics.
let
  lib = import ../../doubles/nixpkgs/lib.nix;
in
rec {
  inherit (builtins) attrNames attrValues concatStringsSep elem elemAt filter foldl' head isString length listToAttrs mapAttrs replaceStrings substring hasAttr isList isAttrs isFunction;
  trace = builtins.trace;
  any = builtins.any;
  all = builtins.all;
  flatten = x: if builtins.isList x then builtins.concatMap flatten x else [ x ];
  mapAttrsToList = f: attrs: map (n: f n attrs.${n}) (builtins.attrNames attrs);
  mapAttrs' = f: set: builtins.listToAttrs (mapAttrsToList f set);
  filterAttrs = pred: set: builtins.removeAttrs set (builtins.filter (n: !pred n set.${n}) (builtins.attrNames set));
  optional = c: x: if c then [ x ] else [ ];
  optionals = c: x: if c then x else [ ];
  optionalAttrs = c: s: if c then s else { };
  unique = builtins.foldl' (acc: e: if builtins.elem e acc then acc else acc ++ [ e ]) [ ];
  removeSuffix = suf: str: if lib.hasSuffix suf str then builtins.substring 0 (builtins.stringLength str - builtins.stringLength suf) str else str;
  removePrefix = pre: str: if lib.hasPrefix pre str then builtins.substring (builtins.stringLength pre) (builtins.stringLength str) str else str;
  makeOverridable = f: args:
    let r = f args; in
    if builtins.isAttrs r then r // { override = newArgs: makeOverridable f (args // (if builtins.isFunction newArgs then newArgs args else newArgs)); } else r;
  platforms.all = [ "x86_64-linux" "aarch64-linux" ];
  fix = lib.fix;
}
