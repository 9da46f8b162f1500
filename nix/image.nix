# The container image (`nix build .#image`, then `./result | docker load`): Python with kiln's
# wheel, the runtime libraries it dlopens by soname (cuDART, cuBLAS, cuDNN, NCCL from the locked
# nixpkgs, the releases the pins admit) and the `kiln` CLI, whose `kiln doctor --runtime-only`
# is the entry point. Nothing in it provides `libcuda`: the NVIDIA container toolkit mounts the
# host driver's libcuda.so.1 into the container (nvidia-container-cli, at run time), and a
# libcuda in the image would shadow it. cuda_cudart's `stubs` output (a fake libcuda.so.1 for
# linking) is refused at evaluation; checks.<system>.image-no-libcuda scans the whole closure.
#
# dockerTools.streamLayeredImage (pkgs/build-support/docker/default.nix): a script that streams
# the image tarball; its layers are store paths with `created` fixed (1970-01-01T00:00:01Z by
# default), so the same closure gives the same layers on any machine. The non-Nix twin is
# `cargo xtask image` (a Debian base from debootstrap, the same wheel and PyPI runtime wheels).
{ pkgs, pins, crates, cuda, wheel }:
let
  inherit (pkgs) lib;
  python = pkgs.python3;
  # The wheel unpacked as an installer lays it out (kiln's wheel has no .data directory).
  site = pkgs.runCommand "kiln-site-packages" { nativeBuildInputs = [ python ]; } ''
    mkdir -p $out/site-packages
    for w in ${wheel}/*.whl; do python3 -m zipfile -e "$w" $out/site-packages; done
  '';
  runtimeLibs = map lib.getLib [
    cuda.cudaPackages.cuda_cudart
    cuda.cudaPackages.libcublas
    cuda.cudnn
    cuda.nccl
  ];
  contents = [ python crates.kiln site ] ++ runtimeLibs;
  # Where the NVIDIA container toolkit puts the host driver, and where kiln looks for it.
  driverDirs = [ "/usr/lib64" "/usr/lib/x86_64-linux-gnu" "/usr/lib/aarch64-linux-gnu" "/usr/local/nvidia/lib64" ];
  stubs = builtins.filter (p: (p.outputName or "out") == "stubs") contents;
  closure = pkgs.closureInfo { rootPaths = contents; };
in
assert lib.assertMsg (stubs == [ ])
  "kiln image: ${toString (map (p: p.name) stubs)} is a driver stub output (a fake libcuda); it must not be in the image";
{
  image = pkgs.dockerTools.streamLayeredImage {
    name = "kiln";
    tag = pins.version;
    inherit contents;
    config = {
      Entrypoint = [ "${crates.kiln}/bin/kiln" ];
      Cmd = [ "doctor" "--runtime-only" ];
      Env = [
        "PYTHONPATH=${site}/site-packages"
        "LD_LIBRARY_PATH=${builtins.concatStringsSep ":" (map (l: "${l}/lib") runtimeLibs ++ driverDirs)}"
        "NVIDIA_VISIBLE_DEVICES=all"
        "NVIDIA_DRIVER_CAPABILITIES=compute,utility"
      ];
    };
    passthru = { inherit contents; };
  };
  # Every file of the image's closure, scanned: no libcuda of any name.
  noLibcuda = pkgs.runCommand "kiln-image-no-libcuda" { } ''
    found=$(while read -r p; do find "$p" -name 'libcuda.so*' -o -name 'libcuda-*'; done < ${closure}/store-paths)
    if [ -n "$found" ]; then
      echo "kiln image: the closure provides libcuda (the NVIDIA container toolkit mounts the host's):" >&2
      echo "$found" >&2
      exit 1
    fi
    touch $out
  '';
}
