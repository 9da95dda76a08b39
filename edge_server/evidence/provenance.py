"""Where a record came from: the software (version, git commit), the model files (SHA-256), and
the state of this machine's clock.

* :func:`software`: the installed version, and the commit: of the git checkout the code runs from
  (``+dirty`` when tracked files differ from it), else the one a wheel or image was built from
  (``airpatrol/BUILD_COMMIT``, written by ``setup.py``), else unknown, saying so.
* :func:`file_sha256`: a model file's hash, cached by (path, size, mtime); a model folder (an
  OpenVINO IR: .xml + .bin) hashes each of its files.
* :func:`clock_state`: the kernel's view of the clock (Linux ``adjtimex``): synchronised to a time
  source or not, and its maximum and estimated error. A record's UTC times are only as good as
  this; a pack states it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import logging
import subprocess
import sys
import threading
from importlib import resources
from pathlib import Path

log = logging.getLogger(__name__)

_REPO = Path(__file__).resolve().parents[2]


@functools.cache
def software() -> dict:
    """{"name", "version", "commit", "commit_source", "python"}; computed once per process."""
    from edge_server import __version__

    commit, source = _git_commit()
    if commit is None:
        commit, source = _build_stamp()
    return {
        "name": "airpatrol",
        "version": __version__,
        "commit": commit,
        "commit_source": source,
        "python": sys.version.split()[0],
    }


def _git_commit() -> tuple[str | None, str]:
    if not (_REPO / ".git").exists():
        return None, "no git checkout"
    try:
        head = subprocess.run(
            ["git", "-C", str(_REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(_REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None, "git unavailable"
    return (head + ("+dirty" if dirty else "")), "git checkout"


def _build_stamp() -> tuple[str | None, str]:
    try:
        text = resources.files("airpatrol").joinpath("BUILD_COMMIT").read_text(encoding="utf-8").strip()
    except (FileNotFoundError, OSError, ModuleNotFoundError):
        return None, "unknown: not a git checkout and no build stamp (airpatrol/BUILD_COMMIT)"
    return (text or None), "build stamp"


_hash_lock = threading.Lock()
_hashes: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, cached while its size and modification time stay the same."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _hash_lock:
        if key in _hashes:
            return _hashes[key]
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    with _hash_lock:
        _hashes[key] = value
    return value


def model_files(paths: dict[str, str]) -> list[dict]:
    """[{"role", "path", "sha256", "bytes"}] of the model files named (a role -> a path; a folder, or
    an OpenVINO .xml with its .bin: each file); a path that is no file is listed with its reason."""
    out: list[dict] = []
    for role, name in paths.items():
        p = Path(name)
        files = sorted(f for f in p.iterdir() if f.is_file()) if p.is_dir() else [p]
        if p.suffix == ".xml" and p.with_suffix(".bin").exists():
            files.append(p.with_suffix(".bin"))
        for f in files:
            try:
                out.append(
                    {"role": role, "path": str(f), "sha256": file_sha256(f), "bytes": f.stat().st_size}
                )
            except OSError as exc:
                out.append({"role": role, "path": str(f), "sha256": None, "error": str(exc)})
    return out


class _Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


class _Timex(ctypes.Structure):  # struct timex, <sys/timex.h>
    _fields_ = [
        ("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long), ("status", ctypes.c_int),
        ("constant", ctypes.c_long), ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
        ("time", _Timeval), ("tick", ctypes.c_long), ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long), ("shift", ctypes.c_int), ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long), ("calcnt", ctypes.c_long), ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long), ("tai", ctypes.c_int), ("_pad", ctypes.c_int * 11),
    ]  # fmt: skip


_STA_UNSYNC = 0x0040
_TIME_ERROR = 5


def clock_state() -> dict:
    """{"synchronized": bool | None, "max_error_ms", "est_error_ms", "source", "detail"} from the
    kernel (read only: ``modes`` 0 changes nothing). ``synchronized`` None: this system cannot say."""
    if not sys.platform.startswith("linux"):
        return {
            "synchronized": None,
            "source": "none",
            "detail": f"clock state not readable on {sys.platform}",
        }
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        tx = _Timex()
        state = libc.adjtimex(ctypes.byref(tx))
    except (OSError, AttributeError) as exc:
        return {"synchronized": None, "source": "adjtimex", "detail": f"adjtimex unavailable: {exc}"}
    if state < 0:
        return {
            "synchronized": None,
            "source": "adjtimex",
            "detail": f"adjtimex failed (errno {ctypes.get_errno()})",
        }
    synced = state != _TIME_ERROR and not (tx.status & _STA_UNSYNC)
    return {
        "synchronized": synced,
        "max_error_ms": round(tx.maxerror / 1000.0, 3),
        "est_error_ms": round(tx.esterror / 1000.0, 3),
        "source": "adjtimex",
        "detail": (
            "the kernel clock is disciplined by a time source (NTP/PTP)"
            if synced
            else "the kernel clock is NOT synchronised to a time source: UTC times are this box's own"
        ),
    }


__all__ = ["clock_state", "file_sha256", "model_files", "software"]
