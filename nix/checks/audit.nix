# The release gate: `kiln audit` over the built wheel, with the policy (arch matrix, PTX
# targets, minimum driver, runtime wheels) from the same Cargo.toml the wheel was built from
# (`policy`: kiln's own, or a project's through kiln.lib's auditCheck).
# Linkage, arch-matrix and metadata findings fail the check (exit 1), as does an audit that
# cannot run (exit 2); the JSON and human reports are kept in $out.
{ pkgs, kiln, wheel, policy }:
pkgs.runCommand "kiln-audit-wheel"
{
  nativeBuildInputs = [ kiln ];
  inherit policy;
} ''
  shopt -s nullglob
  wheels=(${wheel}/*.whl)
  if [ ''${#wheels[@]} -ne 1 ]; then
    echo "kiln-audit-wheel: expected exactly one wheel in ${wheel}, found ''${#wheels[@]}" >&2
    exit 2
  fi
  mkdir -p $out
  status=0
  kiln audit "''${wheels[0]}" --policy "$policy" --json > $out/audit.json || status=$?
  kiln audit "''${wheels[0]}" --policy "$policy" | tee $out/audit.txt || true
  exit $status
''
