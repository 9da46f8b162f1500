# The release gate: `kiln audit` over the built wheel, with the policy (arch matrix, PTX
# targets, minimum driver, runtime wheels) taken from the same Cargo.toml the wheel was built
# from. Linkage, arch matrix and metadata findings fail the check.
{ pkgs, kiln, wheel, root }:
pkgs.runCommand "kiln-audit-wheel"
{
  nativeBuildInputs = [ kiln ];
  policy = root + "/Cargo.toml";
} ''
  shopt -s nullglob
  wheels=(${wheel}/*.whl)
  if [ ''${#wheels[@]} -ne 1 ]; then
    echo "kiln-audit-wheel: expected exactly one wheel in ${wheel}, found ''${#wheels[@]}" >&2
    exit 2
  fi
  mkdir -p $out
  kiln audit --policy "$policy" --json "''${wheels[0]}" > $out/audit.json
  kiln audit --policy "$policy" "''${wheels[0]}" | tee $out/audit.txt
''
