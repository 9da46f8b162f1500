# An attribute set as a TOML document, at evaluation (a Cargo.toml that holds only what a
# derivation reads, so an edit elsewhere in the real one does not reach it). Strings, booleans,
# integers, lists and nested tables: what `builtins.fromTOML` gives for a Cargo.toml. The text
# is read back with `builtins.fromTOML` and must equal the input, so a value this writer cannot
# express fails evaluation instead of being written wrong.
let
  inherit (builtins) attrNames concatStringsSep filter isAttrs isBool isInt isList isString toJSON typeOf;
  # JSON's string and key syntax is a subset of TOML's basic strings and quoted keys.
  key = toJSON;
  value = v:
    if isString v then toJSON v
    else if isBool v then (if v then "true" else "false")
    else if isInt v then toString v
    else if isList v then "[" + concatStringsSep ", " (map value v) + "]"
    else if isAttrs v then "{ " + concatStringsSep ", " (map (k: "${key k} = ${value v.${k}}") (attrNames v)) + " }"
    else throw "kiln toml: cannot write a ${typeOf v}";
  # A table: its scalars (and inline values) under its header, then each sub-table.
  table = path: t:
    let
      names = attrNames t;
      scalars = filter (k: !isAttrs t.${k}) names;
      tables = filter (k: isAttrs t.${k}) names;
      header = if path == [ ] then "" else "[${concatStringsSep "." (map key path)}]\n";
      body = concatStringsSep "" (map (k: "${key k} = ${value t.${k}}\n") scalars);
      own = if scalars != [ ] || tables == [ ] then header + body + "\n" else "";
    in
    own + concatStringsSep "" (map (k: table (path ++ [ k ]) t.${k}) tables);
in
doc:
let text = table [ ] doc; in
if builtins.fromTOML text == doc then text
else throw "kiln toml: the written document does not read back as the input:\n${text}"
