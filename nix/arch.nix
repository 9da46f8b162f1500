# The arch matrix (Cargo.toml `archs`) in nixpkgs' CUDA terms. It is given to kiln's own
# derivations only (KILN_CUDA_CAPABILITIES, nix/crates.nix), never to nixpkgs' global config
# (nix/pkgs.nix says why), and keeps the matrix within what nixpkgs could express.
#
# nixpkgs takes `cudaCapabilities` ("8.0", "9.0a", "12.0f", ...) and one switch,
# `cudaForwardCompat`, that adds compute PTX for the LAST capability only. So a matrix is
# expressible exactly when at most one entry carries `+PTX` and that entry is the highest,
# plain (neither `a` nor `f`: their PTX never JITs to another architecture) target. Anything
# else is refused here with a message, rather than built with a different PTX set than the
# one `kiln audit` will demand of the wheel. Each entry is read by nix/arch-grammar.nix (the
# grammar, tested against kiln-arch's parser).
archs:
let
  grammar = (import ./arch-grammar.nix).parse;
  parse = entry:
    let
      r = grammar entry;
    in
    if r ? error then
      throw "kiln: arch matrix entry ${builtins.toJSON entry} (Cargo.toml [workspace.metadata.kiln] archs): ${r.error}"
    else r;

  parsed = map parse archs;
  ptxEntries = builtins.filter (a: a.ptx) parsed;
  sassOnly = builtins.filter (a: !a.ptx) parsed;
  highest = builtins.foldl' (n: a: if a.number > n then a.number else n) 0 parsed;
  inexpressible = why: throw "kiln: arch matrix entry nixpkgs cannot express: ${why}. nixpkgs' cudaForwardCompat embeds PTX for the last (highest) capability only; put `+PTX` on at most one plain entry, the highest one, or drop it.";
  sorted = builtins.sort (a: b: a.number < b.number || (a.number == b.number && a.variant < b.variant)) sassOnly;
  capabilities = map (a: a.capability) (sorted ++ ptxEntries);
  duplicates = builtins.filter (c: builtins.length (builtins.filter (x: x == c) capabilities) > 1) capabilities;
in
if archs == [ ] then
  throw "kiln: the arch matrix (Cargo.toml [workspace.metadata.kiln] archs) is empty"
else if builtins.length ptxEntries > 1 then
  inexpressible "${builtins.toJSON (map (a: a.entry) ptxEntries)} all ask for PTX"
else if ptxEntries != [ ] && (builtins.head ptxEntries).variant != "" then
  inexpressible "${builtins.toJSON (builtins.head ptxEntries).entry} asks for PTX of an arch-specific or family target"
else if ptxEntries != [ ] && (builtins.head ptxEntries).number != highest then
  inexpressible "${builtins.toJSON (builtins.head ptxEntries).entry} asks for PTX but is not the highest capability in the matrix"
else if duplicates != [ ] then
  throw "kiln: arch matrix lists ${builtins.toJSON (builtins.head duplicates)} more than once"
else {
  # The order matters to nixpkgs: the forward-compatible (PTX) capability goes last.
  cudaCapabilities = capabilities;
  cudaForwardCompat = ptxEntries != [ ];
}
