# kiln: find the host's NVIDIA driver library (libcuda.so.1) for programs run from this shell.
#
# - NixOS: the driver lives in /run/opengl-driver/lib.
# - Other distributions: ask the host's ldconfig cache, then look in the usual places
#   (Debian/Ubuntu multiarch, RHEL lib64, WSL, NVIDIA container toolkit mounts).
# Only libcuda.so.1 and its sibling libnvidia-* libraries are exposed, through symlinks in a
# private directory, so that none of the host's other libraries (its libc) leak into Nix
# programs. The toolkit's stub libcuda (lib/stubs, or cuda_cudart's `stubs` output) is never
# accepted, and stub directories already on LD_LIBRARY_PATH are removed.
# Override: KILN_CUDA_DRIVER_DIR=/some/dir. Search list (tests): KILN_DRIVER_SEARCH_PATH.
kiln_is_stub() {
  case "$1" in */stubs | */stubs/* | *-stubs/* | *-stubs) return 0 ;; esac
  return 1
}
kiln_find_driver() {
  local d candidates=""
  if [ -n "${KILN_CUDA_DRIVER_DIR:-}" ]; then
    candidates="$KILN_CUDA_DRIVER_DIR"
  else
    if [ -n "${KILN_DRIVER_SEARCH_PATH+x}" ]; then
      candidates="$KILN_DRIVER_SEARCH_PATH"
    else
      candidates="/run/opengl-driver/lib"
      for ldc in /sbin/ldconfig /usr/sbin/ldconfig /sbin/ldconfig.real; do
        if [ -x "$ldc" ]; then
          d=$("$ldc" -p 2>/dev/null | awk '$1 == "libcuda.so.1" && /x86-64|AArch64/ { print $NF; exit }')
          d=${d%/libcuda.so.1}
          [ -n "$d" ] && candidates="$candidates:$d"
          break
        fi
      done
      candidates="$candidates:/usr/lib/x86_64-linux-gnu:/usr/lib/aarch64-linux-gnu:/usr/lib64:/usr/lib:/usr/lib/wsl/lib:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
    fi
  fi
  local IFS=:
  for d in $candidates; do
    [ -n "$d" ] || continue
    kiln_is_stub "$d" && continue
    if [ -e "$d/libcuda.so.1" ]; then
      # Resolve symlinks: a link into a stubs directory is a stub too.
      local real
      real=$(readlink -f "$d/libcuda.so.1" 2>/dev/null || echo "$d/libcuda.so.1")
      kiln_is_stub "$(dirname "$real")" && continue
      printf '%s\n' "$d"
      return 0
    fi
  done
  return 1
}
kiln_drop_stub_dirs() {
  local out="" d IFS=:
  for d in ${LD_LIBRARY_PATH:-}; do
    if kiln_is_stub "$d"; then
      echo "kiln: removed CUDA stub directory $d from LD_LIBRARY_PATH" >&2
      continue
    fi
    out="${out:+$out:}$d"
  done
  if [ -n "$out" ]; then export LD_LIBRARY_PATH="$out"; else unset LD_LIBRARY_PATH; fi
}
kiln_setup_driver() {
  kiln_drop_stub_dirs
  local dir link_dir f
  if ! dir=$(kiln_find_driver); then
    echo "kiln: no NVIDIA driver (libcuda.so.1) found on this host; building works, running GPU code does not" >&2
    return 0
  fi
  link_dir="${KILN_DRIVER_LINK_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/driver-$(printf '%s' "$dir" | cksum | cut -d' ' -f1)}"
  mkdir -p "$link_dir"
  rm -f "$link_dir"/lib*
  for f in "$dir"/libcuda.so.* "$dir"/libnvidia-*.so*; do
    [ -e "$f" ] && ln -sf "$f" "$link_dir/"
  done
  export KILN_CUDA_DRIVER="$dir/libcuda.so.1"
  export LD_LIBRARY_PATH="$link_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
kiln_setup_driver
