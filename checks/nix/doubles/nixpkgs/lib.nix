# The subset of nixpkgs' `lib` that kiln's flake uses, with nixpkgs' names and semantics.
# Anything else is absent on purpose.
let
  splitVersion = builtins.splitVersion;
  versionPart = n: v: builtins.concatStringsSep "." (builtins.genList (builtins.elemAt (splitVersion v)) n);

  fileset =
    let
      isPrefix = a: b: a == b || builtins.substring 0 (builtins.stringLength a + 1) b == a + "/";
      # A directory is in the source only if it holds a kept file (nixpkgs never leaves empty
      # directories behind).
      keptDir = e: dir:
        (e.keepDir or (_: true)) dir && (
          let entries = builtins.readDir (/. + dir); in
          builtins.any
            (name:
              let q = "${dir}/${name}"; in
              if entries.${name} == "directory" then keptDir e q else e.keep q)
            (builtins.attrNames entries)
        );
      isFileset = x: builtins.isAttrs x && (x._type or null) == "fileset";
      coerce = ctx: x:
        if isFileset x then x
        else if builtins.isPath x then
          if builtins.pathExists x then { _type = "fileset"; elements = [{ path = x; keep = _: true; }]; }
          else throw "lib.fileset.${ctx}: Element (${toString x}) does not exist."
        else throw "lib.fileset.${ctx}: Element is of type ${builtins.typeOf x}, but it should be a file set or a path instead.";
    in
    {
      maybeMissing = path:
        if !builtins.isPath path then throw "lib.fileset.maybeMissing: Argument is of type ${builtins.typeOf path}, but it should be a path instead."
        else if builtins.pathExists path then coerce "maybeMissing" path
        else { _type = "fileset"; elements = [ ]; };
      difference = positive: negative:
        let
          neg = (coerce "difference" negative).elements;
          excluded = p: builtins.any (e: isPrefix (toString e.path) p && e.keep p) neg;
        in
        {
          _type = "fileset";
          # As in nixpkgs, a subtracted directory is gone, not left behind empty.
          elements = map (e: e // { keep = p: e.keep p && !excluded p; keepDir = p: (e.keepDir or (_: true)) p && !excluded p; }) (coerce "difference" positive).elements;
        };
      unions = list:
        if !builtins.isList list then throw "lib.fileset.unions: Argument is of type ${builtins.typeOf list}, but it should be a list instead."
        else { _type = "fileset"; elements = builtins.concatMap (x: (coerce "unions" x).elements) list; };
      toSource = { root, fileset }:
        let
          fs = coerce "toSource" fileset;
          rootStr = toString root;
          under = p: builtins.substring 0 (builtins.stringLength rootStr + 1) (toString p) == rootStr + "/" || toString p == rootStr;
          bad = builtins.filter (e: !under e.path) fs.elements;
        in
        if !builtins.isPath root then throw "lib.fileset.toSource: `root` is of type ${builtins.typeOf root}, but it should be a path instead."
        else if bad != [ ] then throw "lib.fileset.toSource: `fileset` could contain files in ${toString (builtins.head bad).path}, which is not under the `root` (${rootStr})."
        else
          builtins.path {
            path = root;
            name = "source";
            filter = p: type: builtins.any
              (e:
                let ep = toString e.path; in
                (type == "directory" && isPrefix p ep) || (isPrefix ep p && (if type == "directory" then keptDir e p else e.keep p)))
              fs.elements;
          };
    };
in
rec {
  version = "26.11pre-double";
  inherit fileset;

  fix = f: let x = f x; in x;
  genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  concatMap = builtins.concatMap;
  last = list: if list == [ ] then throw "lib.last: list must not be empty!" else builtins.elemAt list (builtins.length list - 1);
  splitString = sep: s: builtins.filter builtins.isString (builtins.split (builtins.replaceStrings [ "." "+" "*" "?" "(" ")" "[" "]" "{" "}" "|" "^" "$" ] [ "\\." "\\+" "\\*" "\\?" "\\(" "\\)" "\\[" "\\]" "\\{" "\\}" "\\|" "\\^" "\\$" ] sep) s);
  setAttrByPath = path: value:
    if path == [ ] then value
    else { ${builtins.head path} = setAttrByPath (builtins.tail path) value; };
  recursiveUpdate = lhs: rhs:
    lhs // builtins.mapAttrs
      (n: v: if lhs ? ${n} && builtins.isAttrs v && builtins.isAttrs lhs.${n} && !(v ? type && v.type == "derivation") then recursiveUpdate lhs.${n} v else v)
      rhs;
  remove = e: builtins.filter (x: x != e);
  hasPrefix = pref: str: builtins.substring 0 (builtins.stringLength pref) str == pref;
  hasSuffix = suf: str:
    let l = builtins.stringLength str; s = builtins.stringLength suf; in
    l >= s && builtins.substring (l - s) s str == suf;
  versionOlder = v1: v2: builtins.compareVersions v2 v1 == 1;
  optionalString = cond: s: if cond then s else "";
  assertMsg = pred: msg: pred || builtins.throw msg;
  warnIf = cond: msg: if cond then builtins.warn msg else x: x;
  getOutput = output: pkg: pkg.${output} or pkg.out or pkg;
  getLib = getOutput "lib";
  getExe = pkg: "${pkg}/bin/${pkg.meta.mainProgram}";

  versions = {
    major = versionPart 1;
    majorMinor = versionPart 2;
  };
}
