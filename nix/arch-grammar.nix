# The arch matrix entry grammar, MAJOR.MINOR[a|f][+PTX], as kiln-arch defines it
# (crates/kiln-arch/src/arch.rs, `MatrixEntry: FromStr`): no whitespace, `+PTX` upper case, a
# known compute capability (leading zeros allowed, "08.0" is 8.0), `a` from 9.0 and `f` from
# 10.0 on. Nix cannot call the Rust parser without import-from-derivation, so this is the one
# other parser, and crates/kiln-arch/tests/nix_grammar.rs runs both over the same valid and
# invalid entries (and compares `known` with KNOWN_CAPABILITIES) and requires the same verdicts.
# kiln-build compares what Nix derives from it (KILN_CUDA_CAPABILITIES) with its own matrix.
let
  # CUDA 13 numbering (sm_101 became sm_110); kiln-arch's KNOWN_CAPABILITIES.
  known = [ "7.5" "8.0" "8.6" "8.7" "8.8" "8.9" "9.0" "10.0" "10.3" "11.0" "12.0" "12.1" ];
  digits = s: builtins.head (builtins.match "0*([0-9]+)" s);
  parse = entry:
    let
      m = if builtins.isString entry then builtins.match "([0-9]+)\\.([0-9]+)([af]?)(\\+PTX)?" entry else null;
      major = digits (builtins.elemAt m 0);
      minor = digits (builtins.elemAt m 1);
      plain = "${major}.${minor}";
      variant = builtins.elemAt m 2;
      majorNumber = builtins.fromJSON major;
      ptx = builtins.elemAt m 3 != null;
    in
    if m == null then
      { error = "is not MAJOR.MINOR[a|f][+PTX], e.g. \"9.0a\" or \"12.0+PTX\""; }
    else if !(builtins.elem plain known) then
      { error = "${plain} is not a compute capability (known: ${builtins.concatStringsSep ", " known})"; }
    else if variant == "a" && majorNumber < 9 then
      { error = "${plain}a: `a` variants exist from 9.0 on"; }
    else if variant == "f" && majorNumber < 10 then
      { error = "${plain}f: `f` variants exist from 10.0 on"; }
    else {
      inherit entry variant ptx;
      capability = "${plain}${variant}";
      number = majorNumber * 100 + builtins.fromJSON minor;
      # The entry as kiln-arch's Display writes it.
      canonical = "${plain}${variant}${if ptx then "+PTX" else ""}";
    };
in
{
  inherit known parse;
}
