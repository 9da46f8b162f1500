# nixpkgs lib functions the real rust-overlay and crane use, written from their documented
# semantics (project-written; only what those two read).
let
  lib = import ../../doubles/nixpkgs/lib.nix;
  b = builtins;
  self = rec {
    inherit (b) attrNames attrValues concatStringsSep elem elemAt filter foldl' head isString length listToAttrs mapAttrs replaceStrings substring hasAttr isList isAttrs isFunction genList stringLength any all trace;
    inherit (lib) fix version hasPrefix hasSuffix optionalString genAttrs warnIf;
    warn = b.warn;
    flatten = x: if b.isList x then b.concatMap flatten x else [ x ];
    flip = f: a: c: f c a;
    foldl = op: nul: list: b.foldl' op nul list;
    last = list: b.elemAt list (b.length list - 1);
    nameValuePair = name: value: { inherit name value; };
    mapAttrsToList = f: attrs: map (n: f n attrs.${n}) (b.attrNames attrs);
    mapAttrs' = f: set: b.listToAttrs (mapAttrsToList f set);
    attrsToList = mapAttrsToList nameValuePair;
    filterAttrs = pred: set: b.removeAttrs set (b.filter (n: !pred n set.${n}) (b.attrNames set));
    filterAttrsRecursive = pred: set:
      b.listToAttrs (b.concatMap
        (name:
          let v = set.${name}; in
          if pred name v then [ (nameValuePair name (if b.isAttrs v then filterAttrsRecursive pred v else v)) ] else [ ])
        (b.attrNames set));
    recursiveUpdate = lhs: rhs:
      lhs // b.mapAttrs (n: v: if b.isAttrs v && b.isAttrs (lhs.${n} or null) then recursiveUpdate lhs.${n} v else v) rhs;
    mergeAttrsList = b.foldl' (a: c: a // c) { };
    groupBy = pred: b.foldl' (r: e: let k = pred e; in r // { ${k} = (r.${k} or [ ]) ++ [ e ]; }) { };
    optional = c: x: if c then [ x ] else [ ];
    optionals = c: x: if c then x else [ ];
    optionalAttrs = c: s: if c then s else { };
    unique = b.foldl' (acc: e: if b.elem e acc then acc else acc ++ [ e ]) [ ];
    sortOn = f: list: map (p: p.v) (b.sort (x: y: x.k < y.k) (map (v: { k = f v; inherit v; }) list));
    concatStrings = b.concatStringsSep "";
    concatMapStrings = f: list: concatStrings (map f list);
    concatMapStringsSep = sep: f: list: b.concatStringsSep sep (map f list);
    splitString = sep: s: b.filter b.isString (b.split (escapeRegex sep) s);
    escapeRegex = b.replaceStrings
      [ "\\" "[" "{" "(" ")" "^" "$" "?" "*" "+" "|" "." ]
      [ "\\\\" "\\[" "\\{" "\\(" "\\)" "\\^" "\\$" "\\?" "\\*" "\\+" "\\|" "\\." ];
    escapeShellArg = arg: "'${b.replaceStrings [ "'" ] [ "'\\''" ] (toString arg)}'";
    toLower = b.replaceStrings
      (b.genList (i: b.substring i 1 "ABCDEFGHIJKLMNOPQRSTUVWXYZ") 26)
      (b.genList (i: b.substring i 1 "abcdefghijklmnopqrstuvwxyz") 26);
    removeSuffix = suf: str: if hasSuffix suf str then b.substring 0 (b.stringLength str - b.stringLength suf) str else str;
    removePrefix = pre: str: if hasPrefix pre str then b.substring (b.stringLength pre) (b.stringLength str) str else str;
    makeOverridable = f: args:
      let r = f args; in
      if b.isAttrs r then r // { override = newArgs: makeOverridable f (args // (if b.isFunction newArgs then newArgs args else newArgs)); } else r;
    platforms.all = [ "x86_64-linux" "aarch64-linux" ];
    splitVersion = b.splitVersion;
    versionOlder = a: c: b.compareVersions a c < 0;
    versionAtLeast = a: c: b.compareVersions a c >= 0;
    listFilesRecursive = dir:
      b.concatMap
        (n: let t = (b.readDir dir).${n}; p = dir + "/${n}"; in if t == "directory" then listFilesRecursive p else [ p ])
        (b.attrNames (b.readDir dir));
    cleanSourceWith = { src, filter ? _: _: true, name ? "source" }: b.path { path = src; inherit filter name; };
    cleanSource = src: cleanSourceWith { inherit src; };
    sourceFilesBySuffices = src: exts:
      cleanSourceWith { inherit src; filter = p: type: type == "directory" || b.any (e: hasSuffix e p) exts; };

    lists = self // {
      findFirst = pred: default: list: let r = b.filter pred list; in if r == [ ] then default else b.head r;
      hasPrefix = pre: list: b.length pre <= b.length list && b.genList (i: b.elemAt list i) (b.length pre) == pre;
      sublist = start: count: list:
        let len = b.length list; in
        b.genList (n: b.elemAt list (n + start)) (if start >= len then 0 else if start + count > len then len - start else count);
    };
    # nixpkgs' lib.lists / lib.attrsets / lib.strings hold subsets of these; crane picks from them.
    attrsets = self;
    strings = self;
    trivial = { inherit warn; };
    asserts.assertMsg = lib.assertMsg;

    # lib.fileset.fileFilter in the element format of the double's lib.fileset.
    fileset = lib.fileset // {
      fileFilter = pred: path: {
        _type = "fileset";
        elements = [{
          inherit path;
          keep = p:
            let name = b.baseNameOf p; in
            pred { inherit name; type = "regular"; hasExt = ext: hasSuffix ".${ext}" name; };
        }];
      };
    };
  };
in
self
