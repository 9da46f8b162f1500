# `rust-bin` of the rust-overlay double: nightlies for exactly the dates in nightly-dates.txt,
# each with rust-overlay's profiles (minimal, default, complete), its components, and its
# `override { extensions, targets, targetExtensions, enableLibsecret }` with the same checks.
final: _prev:
let
  lines = builtins.filter (l: builtins.isString l && l != "" && builtins.substring 0 1 l != "#")
    (builtins.split "\n" (builtins.readFile ./nightly-dates.txt));

  # Components and renames of a 2026 nightly manifest, and rustup's profiles.
  components = [
    "cargo"
    "clippy-preview"
    "enzyme-preview"
    "llvm-bitcode-linker-preview"
    "llvm-tools-preview"
    "miri-preview"
    "offload-preview"
    "reproducible-artifacts"
    "rust"
    "rust-analysis"
    "rust-analyzer-preview"
    "rust-docs"
    "rust-docs-json-preview"
    "rust-mingw"
    "rust-src"
    "rust-std"
    "rustc"
    "rustc-codegen-cranelift-preview"
    "rustc-codegen-gcc-preview"
    "rustc-dev"
    "rustc-docs"
    "rustfmt-preview"
  ];
  renames = {
    clippy = "clippy-preview";
    llvm-tools = "llvm-tools-preview";
    miri = "miri-preview";
    rust-analyzer = "rust-analyzer-preview";
    rust-docs-json = "rust-docs-json-preview";
    rustc-codegen-cranelift = "rustc-codegen-cranelift-preview";
    rustfmt = "rustfmt-preview";
  };
  profiles = {
    minimal = [ "rustc" "cargo" "rust-std" ];
    default = [ "rustc" "cargo" "rust-std" "rust-docs" "rustfmt-preview" "clippy-preview" ];
    complete = profiles.default ++ [ "rust-analyzer-preview" "rust-src" "llvm-tools-preview" "rust-analysis" "miri-preview" "rustc-codegen-cranelift-preview" "rustc-dev" ];
  };
  known = name: builtins.elem name components || renames ? ${name};

  mkNightly = date:
    let
      version = "1.100.0-nightly-${date}";
      mkProfile = name: profileComponents:
        let
          build = { extensions, targets, targetExtensions, enableLibsecret }:
            let
              typos = builtins.filter (e: !known e) (extensions ++ targetExtensions);
            in
            if typos != [ ] then
              throw "Component `${builtins.head typos}` doesn't exist in Rust ${version}"
            else
              final.stdenv.mkDerivation {
                pname = "rust-${name}";
                inherit version;
                components = profileComponents ++ extensions;
                inherit targets enableLibsecret;
                passthru = { availableComponents = components; };
              };
          defaults = { extensions = [ ]; targets = [ ]; targetExtensions = [ ]; enableLibsecret = name != "minimal"; };
        in
        build defaults // {
          override = { extensions ? defaults.extensions, targets ? defaults.targets, targetExtensions ? defaults.targetExtensions, enableLibsecret ? defaults.enableLibsecret }:
            build { inherit extensions targets targetExtensions enableLibsecret; };
        };
    in
    builtins.mapAttrs mkProfile profiles;

  nightly = builtins.listToAttrs (map (date: { name = date; value = mkNightly date; }) lines);
in
{
  rust-bin = {
    nightly = nightly // { latest = nightly.${builtins.elemAt lines (builtins.length lines - 1)}; };
  };
}
