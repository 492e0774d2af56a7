"""The llama.cpp library the ``llamacpp`` policy runs on: finding it, checking it, building it.

``llama-cpp-python`` is an optional extra compiled from source (4-11 minutes on 2 cores). The
build must not use llama.cpp's AMX kernels: on VMs that advertise AMX without supporting it (this
project's CI machines) they crash with SIGSEGV on the first decode. So :func:`cmake_args` selects
the CPU features explicitly instead of ``GGML_NATIVE``: each of :data:`CPU_FEATURES` that this
CPU's ``/proc/cpuinfo`` lists, and none it lacks (a build with AVX-VNNI, made on an Intel machine,
stops the process with an illegal instruction on an AMD EPYC without it, 2026-12-06).

* :func:`load_llama_cpp` imports the bindings and checks them: the pinned version, a library that
  loads, no AMX kernels, no CPU feature this CPU lacks. Every failure is one
  :class:`LlamaCppUnavailable` naming the command that fixes it (:data:`INSTALL_COMMAND`).
* :func:`build_wheel` / :func:`ensure_installed` build the pinned version once per CPU feature set
  into a wheel cache outside any checkout (``$SPADE_WHEEL_CACHE``, else
  ``~/.cache/spade-engine/wheels``, one folder per :func:`feature_tag`) and install it from there,
  streaming the compiler's progress; an installed build this CPU cannot run is replaced.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from ..errors import SpadeError

__all__ = [
    "PINNED_VERSION",
    "REQUIREMENT",
    "CPU_FEATURES",
    "cpu_flags",
    "cmake_args",
    "feature_tag",
    "unsupported_features",
    "INSTALL_COMMAND",
    "WHEEL_CACHE_ENV",
    "LlamaCppUnavailable",
    "load_llama_cpp",
    "installed_version",
    "wheel_cache_dir",
    "cached_wheel",
    "build_wheel",
    "ensure_installed",
]

PINNED_VERSION = "0.3.36"
REQUIREMENT = f"llama-cpp-python=={PINNED_VERSION}"
#: llama.cpp's CPU features a build may use (``GGML_<name>`` at build time, ``<name> = 1`` in its
#: system info), each with the ``/proc/cpuinfo`` flag that says this CPU has it; AMX is never used
CPU_FEATURES: tuple[tuple[str, str], ...] = (
    ("AVX", "avx"), ("AVX2", "avx2"), ("FMA", "fma"), ("F16C", "f16c"), ("AVX512", "avx512f"),
    ("AVX512_VNNI", "avx512_vnni"), ("AVX512_BF16", "avx512_bf16"), ("AVX_VNNI", "avx_vnni"),
)
INSTALL_COMMAND = "spade-engine models install-llamacpp"
WHEEL_CACHE_ENV = "SPADE_WHEEL_CACHE"


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str] | None:
    """The CPU's feature flags (the first ``flags`` line of ``/proc/cpuinfo``, or of ``cpuinfo``);
    ``None`` where there is no such file (not Linux, not x86)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return None


def cmake_args(flags: frozenset[str] | None = None) -> str:
    """``CMAKE_ARGS`` for a build that uses the :data:`CPU_FEATURES` this CPU has and no other
    (``flags``: :func:`cpu_flags` by default)."""
    have = cpu_flags() if flags is None else flags
    parts = ["-DGGML_NATIVE=OFF"]
    for name, flag in CPU_FEATURES:
        parts.append(f"-DGGML_{name}={'ON' if have is not None and flag in have else 'OFF'}")
    return " ".join(parts)


def feature_tag(flags: frozenset[str] | None = None) -> str:
    """The wheel cache folder of this CPU's feature set: ``cpu-`` and the features a build for it
    uses (``cpu-generic`` without any)."""
    have = cpu_flags() if flags is None else flags
    used = [name.lower() for name, flag in CPU_FEATURES if have is not None and flag in have]
    return "cpu-" + ("-".join(used) or "generic")


def unsupported_features(system_info: str, flags: frozenset[str] | None = None) -> list[str]:
    """The CPU features a build's system info (``llama_print_system_info``) says it uses and this
    CPU lacks (empty where the CPU's flags are unknown)."""
    have = cpu_flags() if flags is None else flags
    if have is None:
        return []
    on = {part.split("=")[0].split(":")[-1].strip() for part in system_info.split("|") if part.split("=")[-1].strip() == "1"}
    return [name for name, flag in CPU_FEATURES if name in on and flag not in have]


class LlamaCppUnavailable(SpadeError):
    """llama-cpp-python is missing, broken, of another version, built with the AMX kernels, or
    built for CPU features this CPU lacks."""


def installed_version() -> str | None:
    """The installed llama-cpp-python version (from its metadata, without importing it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        return None


def load_llama_cpp() -> ModuleType:
    """The checked ``llama_cpp`` module (see the module docstring); raises
    :class:`LlamaCppUnavailable` with the fix when it cannot be used."""
    fix = f"run `{INSTALL_COMMAND}` (builds {REQUIREMENT} once, about 10 minutes on 2 cores)"
    refix = f"run `{INSTALL_COMMAND} --force` (reinstalls {REQUIREMENT} from the wheel cache, building it if needed)"
    try:
        import llama_cpp
    except ImportError as exc:
        raise LlamaCppUnavailable(f"the llamacpp policy needs llama-cpp-python, which is not installed ({exc}): {fix}") from None
    except (OSError, RuntimeError) as exc:  # the shared library is missing or will not load
        raise LlamaCppUnavailable(f"llama-cpp-python is installed but its library does not load ({exc}): {refix}") from None
    found = getattr(llama_cpp, "__version__", None)
    if found != PINNED_VERSION:
        raise LlamaCppUnavailable(f"llama-cpp-python {found} is installed, the llamacpp policy is built for {PINNED_VERSION}: {refix}")
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    if "AMX_INT8 = 1" in info or "AMX = 1" in info:
        raise LlamaCppUnavailable(
            "this llama-cpp-python build uses llama.cpp's AMX kernels, which crash on machines that advertise AMX "
            f"without supporting it (SIGSEGV in ggml_backend_amx_mul_mat): {refix} (it builds with GGML_NATIVE=OFF)"
        )
    missing = unsupported_features(info)
    if missing:
        raise LlamaCppUnavailable(
            f"this llama-cpp-python build uses {', '.join(missing)}, which this CPU does not have (the first decode would "
            f"stop the process with an illegal instruction): {refix} (it builds for this CPU's features)"
        )
    return llama_cpp


def wheel_cache_dir() -> Path:
    """Where built wheels are kept: ``$SPADE_WHEEL_CACHE``, else ``$XDG_CACHE_HOME`` (or
    ``~/.cache``) ``/spade-engine/wheels``."""
    env = os.environ.get(WHEEL_CACHE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "spade-engine" / "wheels"


def cached_wheel(cache: Path | None = None) -> Path | None:
    """The built wheel of the pinned version for this CPU's features in the cache, if there is one."""
    root = (cache or wheel_cache_dir()) / feature_tag()
    found = sorted(root.glob(f"llama_cpp_python-{PINNED_VERSION}-*.whl")) if root.is_dir() else []
    return found[-1] if found else None


def _stream(cmd: list[str], env: dict[str, str], say: Callable[[str], None], what: str) -> None:
    """Run ``cmd``, passing a progress line to ``say`` every 30 s and the compiler's
    ``[ n%]`` lines as they come; raise with the output's tail when it fails."""
    tail: list[str] = []
    start = last = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-40:]
        now = time.monotonic()
        stepped = line.lstrip().startswith("[") and "%]" in line[:8]
        if (stepped and now - last >= 10) or now - last >= 30:
            say(f"{what}: {int(now - start)} s {line.strip()[:100] if stepped else 'still building'}")
            last = now
    code = proc.wait()
    if code != 0:
        raise LlamaCppUnavailable(f"{what} failed (exit {code}); last lines:\n" + "\n".join(tail[-20:]))


def build_wheel(*, cache: Path | None = None, say: Callable[[str], None] = print, python: str | None = None) -> Path:
    """Build the pinned llama-cpp-python wheel with :func:`cmake_args` into the wheel cache's
    folder for this CPU's features (once: an existing wheel is returned as it is)."""
    found = cached_wheel(cache)
    if found is not None:
        return found
    root = (cache or wheel_cache_dir()) / feature_tag()
    root.mkdir(parents=True, exist_ok=True)
    work = root / f".build-{os.getpid()}"
    work.mkdir(exist_ok=True)
    env = {**os.environ, "CMAKE_ARGS": cmake_args(), "FORCE_CMAKE": "1", "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)}
    say(f"building {REQUIREMENT} from source into {root} (4-11 minutes on 2 cores; once per machine) with {cmake_args()}")
    try:
        _stream(
            [python or sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-v", "-w", str(work), REQUIREMENT],
            env, say, f"building {REQUIREMENT}",
        )
        built = sorted(work.glob("llama_cpp_python-*.whl"))
        if not built:
            raise LlamaCppUnavailable(f"building {REQUIREMENT} produced no wheel in {work}")
        final = root / built[-1].name
        os.replace(built[-1], final)  # atomic: a wheel in the cache is always complete
        return final
    finally:
        for f in work.glob("*"):
            f.unlink(missing_ok=True)
        work.rmdir()


def installed_unsupported_features(python: str | None = None) -> list[str]:
    """:func:`unsupported_features` of the installed build, read in a child process (a build that
    this process loaded could not be replaced in it); empty when it cannot be read."""
    code = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode(errors='replace'))"
    try:
        res = subprocess.run([python or sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return []
    return unsupported_features(res.stdout) if res.returncode == 0 else []


def ensure_installed(*, say: Callable[[str], None] = print, python: str | None = None, force: bool = False) -> Path | None:
    """Make the pinned llama-cpp-python importable: nothing to do when that version is installed
    and built for features this CPU has (returns ``None``; :func:`load_llama_cpp` then says
    whether it works), else build the wheel (or take it from the cache) and install it; ``force``
    reinstalls it from the cache."""
    if installed_version() == PINNED_VERSION and not force:
        missing = installed_unsupported_features(python)
        if not missing:
            return None
        say(f"the installed llama-cpp-python uses {', '.join(missing)}, which this CPU does not have: replacing it")
    wheel = build_wheel(say=say, python=python)
    say(f"installing {wheel.name}")
    cmd = [python or sys.executable, "-m", "pip", "install", "--no-deps", "--force-reinstall", "--quiet", str(wheel)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise LlamaCppUnavailable(f"installing {wheel} failed: {(res.stderr or res.stdout).strip()[-2000:]}")
    # its dependencies (numpy, jinja2, diskcache, typing-extensions) are light; install what is missing
    deps = [python or sys.executable, "-m", "pip", "install", "--quiet", "diskcache>=5.6.1", "jinja2>=2.11.3", "numpy>=1.20.0",
            "typing-extensions>=4.5.0"]
    subprocess.run(deps, capture_output=True, text=True)
    import importlib

    importlib.invalidate_caches()
    return wheel
