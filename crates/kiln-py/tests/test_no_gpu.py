"""The installed `kiln` package on a machine without an NVIDIA driver (CI, the build machines).

Run in the venv that checks/wheel/check_no_gpu.py builds (the wheel installed, numpy present):
    python -m pytest crates/kiln-py/tests
The GPU behaviour is tested by checks/gpu-bundle/test_kiln_gpu.py on a GPU machine.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln

if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
    pytest.skip("this machine has an NVIDIA device; these tests are for machines without one",
                allow_module_level=True)


def test_build_info_is_the_embedded_manifest():
    info = kiln.build_info()
    assert info["version"] == kiln.__version__
    for key in ("targets", "matrix", "min_driver", "toolchain", "flags", "sources", "features", "commit", "provenance"):
        assert key in info, key
    # One source for provenance: the kernel manifest's.
    for key in ("commit", "dirty", "rustc", "clang"):
        assert info[key] == info["provenance"][key], (key, info[key], info["provenance"])
    kinds = {t["target"]: t["kind"] for t in info["targets"]}
    # Every target the matrix asks for (kiln-arch read the manifest's matrix; no parsing here)
    # was built, with its kind.
    assert info["matrix"] and info["matrix_targets"]
    for t in info["matrix_targets"]:
        assert kinds.get(t["target"]) == t["kind"], (t, kinds)
    assert info["features"] == {"cuda": True, "cublas": True, "cudnn": True, "nccl": True}
    # build_info() is a fresh dict each time: callers may modify it.
    info["targets"].clear()
    assert kiln.build_info()["targets"]


def test_kernels_for_every_op_and_float_dtype():
    kernels = set(kiln.build_info()["targets"][0]["kernels"])
    for op in ("vecadd", "axpby", "rmsnorm", "softmax", "rope", "silu_mul", "embedding"):
        for dt in ("f32", "f16", "bf16"):
            assert any(k.startswith(op) and k.endswith(dt) for k in kernels), (op, dt, sorted(kernels))


def test_rust_kernels_are_recorded_and_callable():
    info = kiln.build_info()
    langs = info["kernel_languages"]
    rust = sorted(k for k, lang in langs.items() if lang == "rust")
    # vecadd_flat: the decode-size path (one pack per thread, up to one resident wave), as in C++.
    rust_ops = ("vecadd", "vecadd_flat", "silu_mul", "rmsnorm", "softmax")
    assert rust == sorted(f"rs_{op}_{dt}" for op in rust_ops for dt in ("f32", "f16", "bf16"))
    assert langs["vecadd_f32"] == "cuda"
    assert "release: " in info["kernel_rustc_version"]
    for t in info["targets"]:
        assert set(rust) <= set(t["kernels"]), t["target"]
    # kiln.rs has the C++ ops' contract: same error without a driver.
    x = np.ones(7, dtype=np.float32)
    for fn in (kiln.rs.vecadd, kiln.rs.silu_mul):
        with pytest.raises(kiln.NoDriverError, match=r"^no NVIDIA driver found"):
            fn(x, x)
    with pytest.raises(kiln.NoDriverError):
        kiln.rs.rmsnorm(x.reshape(1, 7), x)
    with pytest.raises(kiln.NoDriverError):
        kiln.rs.softmax(x.reshape(1, 7))


def test_gpu_calls_raise_no_driver_error():
    x = np.ones(7, dtype=np.float32)
    with pytest.raises(kiln.NoDriverError, match=r"^no NVIDIA driver found: libcuda\.so\.1"):
        kiln.vecadd(x, x)
    # As torch.cuda.device_count(): no driver is no device, not an error.
    assert kiln.device_count() == 0
    assert kiln.is_available() is False
    assert issubclass(kiln.NoDriverError, kiln.KilnError)
    assert issubclass(kiln.KilnError, RuntimeError)


def test_bad_inputs_fail_before_the_gpu_is_needed():
    # Non-DLPack objects, unsupported dtypes and non-contiguous arrays are rejected while
    # reading the arguments, with the argument's name, before any driver call.
    # Each is a kiln.KilnError and the builtin Python code expects.
    with pytest.raises(kiln.ArgumentTypeError, match="a: expected an array that supports DLPack") as e:
        kiln.vecadd([1.0], [2.0])
    assert isinstance(e.value, TypeError)
    with pytest.raises(kiln.DTypeError, match="dtype float64 is not supported") as e:
        kiln.softmax(np.ones(3))
    assert isinstance(e.value, TypeError)
    with pytest.raises(kiln.LayoutError, match="contiguous") as e:
        kiln.softmax(np.ones((4, 6), dtype=np.float32).T)
    assert isinstance(e.value, ValueError)
    # PyO3's own argument conversion errors are kiln's too.
    with pytest.raises(kiln.ArgumentTypeError) as e:
        kiln.rope(np.ones((2, 1, 4), dtype=np.float32), offset="x")
    assert isinstance(e.value, TypeError)
    with pytest.raises(kiln.ArgumentValueError, match="positions or offset") as e:
        kiln.rope(np.ones((2, 1, 4), dtype=np.float32), np.zeros(2, np.int64), offset=3)
    assert isinstance(e.value, ValueError)
    for bad in ([1.0], np.ones(3), np.ones((4, 6), dtype=np.float32).T):
        with pytest.raises(kiln.KilnError):
            kiln.softmax(bad)


def test_stream_arguments_are_checked_without_a_gpu():
    # kiln.stream(s) and stream= take a raw handle or a stream object; bad values fail with
    # the argument's name, before any driver call (docs/streams.md).
    assert kiln.current_stream() is None
    with kiln.stream(0x1234) as scope:
        assert kiln.current_stream() == 0x1234 == scope.handle
        with kiln.stream(None):
            assert kiln.current_stream() is None
        assert kiln.current_stream() == 0x1234
    assert kiln.current_stream() is None

    class Proto:
        def __cuda_stream__(self):
            return (0, 0x5678)

    class TorchLike:
        cuda_stream = 0x9ABC

    with kiln.stream(Proto()):
        assert kiln.current_stream() == 0x5678
    with kiln.stream(TorchLike()):
        assert kiln.current_stream() == 0x9ABC
    with kiln.stream(1):  # CU_STREAM_LEGACY is the legacy default stream (handle 0)
        assert kiln.current_stream() == 0
    with pytest.raises(ValueError, match="not a CUDA stream handle"):
        kiln.stream(-3)
    with pytest.raises(TypeError, match="stream: expected a CUDA stream handle"):
        kiln.stream("s")
    x = np.ones(7, dtype=np.float32)
    with pytest.raises(TypeError, match="stream: expected a CUDA stream handle"):
        kiln.vecadd(x, x, stream=object())
    with pytest.raises(kiln.NoDriverError):
        kiln.vecadd(x, x, stream=0)
    assert issubclass(kiln.CaptureError, kiln.KilnError)


def test_error_classes_have_the_builtin_bases():
    bases = {
        "ShapeError": ValueError, "DTypeError": TypeError, "IdOutOfRangeError": IndexError,
        "ArgumentTypeError": TypeError, "ArgumentValueError": ValueError, "LayoutError": ValueError,
        "DeviceMemoryError": ValueError, "ExportError": BufferError,
        "NoDriverError": RuntimeError, "NoDeviceError": RuntimeError, "MissingLibraryError": RuntimeError,
        "CudaError": RuntimeError, "CaptureError": RuntimeError, "NoBackwardError": RuntimeError,
    }
    for name, base in bases.items():
        cls = getattr(kiln, name)
        assert issubclass(cls, kiln.KilnError) and issubclass(cls, base), name
    # Every exception class kiln exports is one of these (none left out of the table).
    exported = {n for n in kiln.__all__ if isinstance(getattr(kiln, n), type) and issubclass(getattr(kiln, n), BaseException)}
    assert exported == set(bases) | {"KilnError"}, exported ^ (set(bases) | {"KilnError"})


def test_import_kiln_rs():
    import kiln.rs as rs

    assert rs is kiln.rs and callable(rs.vecadd)
    from kiln.rs import softmax  # noqa: F401


def _fresh(code, **env):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr
    return r


def test_import_loads_no_cuda_library_and_not_torch(tmp_path):
    # Stand-ins for the NVIDIA wheels' libraries (real shared objects with the sonames and
    # lib dirs of the build's runtime_libraries) on sys.path, so that an eager preload would
    # map them. /proc/self/maps lists every shared object mapped into the process.
    import json

    site = tmp_path / "site"
    for lib in kiln.build_info()["runtime_libraries"].values():
        for soname in lib["sonames"]:
            d = site / lib["lib_dir"]
            d.mkdir(parents=True, exist_ok=True)
            src = tmp_path / "stand_in.c"
            src.write_text("int kiln_stand_in(void) { return 1; }\n")
            r = subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(d / soname), str(src)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip(f"gcc could not build a stand-in library: {r.stderr}")
    out = _fresh(f"""
        import json, sys
        sys.path.append({str(site)!r})
        def mapped():
            maps = open("/proc/self/maps").read()
            return sorted({{l.split("/")[-1] for l in maps.splitlines()
                           if any(k in l for k in ("libcuda", "libcublas", "libcudnn", "libnccl", "libcudart"))}})
        import kiln
        at_import = mapped()
        modules = {{"torch": "torch" in sys.modules, "numpy": "numpy" in sys.modules}}
        kiln.runtime_libraries()  # the first call that needs the libraries loads them
        print(json.dumps({{"import": at_import, "modules": modules, "after": mapped()}}))
    """).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["import"] == [] and got["modules"] == {"torch": False, "numpy": False}, got
    sonames = sorted(s for lib in kiln.build_info()["runtime_libraries"].values() for s in lib["sonames"])
    assert got["after"] == sonames, got


def test_import_time_is_under_40_ms():
    # `python -X importtime`: the cumulative microseconds of `kiln` (its own modules and the
    # extension). The best of up to 15 runs: on a shared, loaded machine the other runs
    # measure the load (seen here: 10 ms best, 90 ms worst at load 22 on 2 cores).
    runs = []
    for _ in range(15):
        err = _fresh("import kiln", PYTHONPROFILEIMPORTTIME="1").stderr
        line = [l for l in err.splitlines() if l.rstrip().endswith("| kiln")][-1]
        runs.append(int(line.split("|")[1]))
        if min(runs) <= 40_000:
            break
    assert min(runs) <= 40_000, f"import kiln took {min(runs)} us at best ({runs})"


def _fake_library(tmp_path, soname):
    """A real shared library with DT_SONAME `soname`, in tmp_path/site/nvidia/fake/lib."""
    lib_dir = tmp_path / "site" / "nvidia" / "fake" / "lib"
    lib_dir.mkdir(parents=True)
    src = tmp_path / "fake.c"
    src.write_text("int kiln_fake_answer(void) { return 42; }\n")
    out = lib_dir / soname
    r = subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"gcc could not build the fake library: {r.stderr}")
    return tmp_path / "site"


def _probe(site, soname, env_extra=None):
    """In a fresh interpreter: preload from `site`, then dlopen by bare soname."""
    code = textwrap.dedent(f"""
        import ctypes, json, sys
        sys.path.insert(0, {str(site)!r})
        from kiln import _preload
        _preload.preload({{"fake": {{"lib_dir": "nvidia/fake/lib", "sonames": [{soname!r}],
                                     "requirement": "nvidia-fake==1"}}}})
        report = _preload.report()
        try:
            answer = ctypes.CDLL({soname!r}).kiln_fake_answer()
        except OSError as e:
            answer = str(e)
        print(json.dumps({{"report": report, "answer": answer}}))
    """)
    env = dict(os.environ, **(env_extra or {}))
    env.pop("LD_LIBRARY_PATH", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    import json
    return json.loads(r.stdout)


def test_preload_makes_the_bare_soname_resolve(tmp_path):
    soname = "libkilnfake.so.7"
    site = _fake_library(tmp_path, soname)
    out = _probe(site, soname)
    assert out["report"][soname]["status"] == "loaded", out
    assert out["report"][soname]["path"].startswith(str(site))
    # What cuBLAS/cuDNN/NCCL users do: dlopen("libX.so.N") with no path; it resolves to the
    # preloaded copy although the directory is on no loader path.
    assert out["answer"] == 42, out


def test_preload_off_and_not_found(tmp_path):
    soname = "libkilnfake.so.7"
    site = _fake_library(tmp_path, soname)
    off = _probe(site, soname, {"KILN_NO_PRELOAD": "1"})
    assert off["report"][soname]["status"].startswith("skipped"), off
    assert off["answer"] != 42  # not found by the loader: the preload is what made it work
    missing = _probe(tmp_path / "empty", soname)
    assert missing["report"][soname]["status"] == "not found"
    # Quoted, so that a range (>=9.19,<10) is not a shell redirection when pasted.
    assert 'pip install "nvidia-fake==1"' in missing["report"][soname]["error"]


def test_runtime_libraries_report_every_pinned_soname():
    libs = kiln.build_info()["runtime_libraries"]
    report = kiln.runtime_libraries()
    for name, lib in libs.items():
        # Requires-Dist is the declared range; the exact pin is what the build was tested with.
        assert lib["requirement"] == f"{lib['wheel']}{lib['requires']}"
        assert lib["version"] and lib["requires"].startswith(">=")
        for soname in lib["sonames"]:
            assert report[soname]["library"] == name
            assert report[soname]["status"] in ("loaded", "already loaded", "not found")
