{
  description = "kiln: the nixpkgs test double plus what the REAL rust-overlay needs to evaluate (evaluation only)";
  outputs = _: {
    lib = import ../../doubles/nixpkgs/lib.nix // import ./lib-extra.nix;
  };
}
