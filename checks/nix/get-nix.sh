#!/usr/bin/env bash
# Copied from the project's shared/tools/get-nix so that `cargo xtask nix-check` can fetch Nix on a
# fresh machine (CI has no shared/ directory). Used as: checks/nix/get-nix.sh .toolchain/nix
# get-nix PREFIX — unpack Debian unstable's nix-bin (Nix 2.34, which current nixpkgs and crane
# require; the host's own Debian release ships 2.8) and its library closure under PREFIX,
# without touching the host's dpkg state or libc, and write PREFIX/bin/nix and
# PREFIX/bin/nix-instantiate wrappers that run it through its own loader with a private,
# offline, single-user store under PREFIX/store. Idempotent. Evaluation works; building
# derivations in that store does not (no binary cache, no sandbox) — evaluate, don't build.
set -euo pipefail
P=$(realpath -m "${1:?usage: get-nix PREFIX}")
if [[ -x $P/bin/nix ]] && "$P/bin/nix" --version >/dev/null 2>&1; then "$P/bin/nix" --version; exit 0; fi
R=$P/root W=$P/apt
mkdir -p "$W/lists/partial" "$W/archives/partial" "$R" "$P/bin" "$P/home" "$P/cache"
# The mirror is whatever this machine's apt already uses; only the suite differs.
uri=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n1)
[[ -n $uri ]] || uri=$(awk '$1=="deb"{for(i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list 2>/dev/null)
[[ -n $uri ]] || { echo "get-nix: no Debian mirror found in this machine's apt configuration" >&2; exit 2; }
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri sid main" >"$W/sources.list"
: >"$W/status"
A=(-o Dir::Etc::sourcelist="$W/sources.list" -o Dir::Etc::sourceparts=- -o Dir::State::Lists="$W/lists"
   -o Dir::State::status="$W/status" -o Dir::Cache="$W" -o Dir::Cache::archives="$W/archives"
   -o Debug::NoLocking=1 -o APT::Install-Recommends=false)
apt-get "${A[@]}" -qq update
apt-get "${A[@]}" -qq -y --download-only install nix-bin >/dev/null
for f in "$W"/archives/*.deb; do dpkg-deb -x "$f" "$R"; done
for prog in nix nix-instantiate nix-store; do
cat >"$P/bin/$prog" <<WRAP
#!/bin/sh
export HOME="$P/home" XDG_CACHE_HOME="$P/cache"
export NIX_CONFIG="experimental-features = nix-command flakes
build-users-group =
sandbox = false
substituters =
store = local?root=$P/store
\${NIX_CONFIG:-}"
exec "$R/usr/lib64/ld-linux-x86-64.so.2" --library-path "$R/usr/lib/x86_64-linux-gnu" --argv0 $prog "$R/usr/bin/$prog" "\$@"
WRAP
chmod +x "$P/bin/$prog"
done
"$P/bin/nix" --version
