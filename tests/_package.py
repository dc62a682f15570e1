"""contextfold as a user gets it: the wheel and sdist built from this checkout, installed alone.

`built_dist` (a session fixture) runs `python -m build` once per test run and gives the wheel and the
sdist. `fresh_venv(wheel, where, extras)` makes a new virtual environment and installs the wheel into
it from the package index, with nothing of this checkout on the path; `clean_env(...)` is the
environment to run it in (no PYTHONPATH, no CONTEXTFOLD_* settings of the developer's, a scratch HOME).

Without `build` or `uv` installed (`pip install -e '.[release]'`) the tests that need them skip
locally and fail under CI=true, like the other tests that need a tool.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL = "pip install -e '.[release]'"

BUILD_TIMEOUT = 300.0
"""Seconds `python -m build` may take (about 15 s here: an sdist, then the wheel from it)."""
INSTALL_TIMEOUT = 600.0
"""Seconds a fresh environment's `pip install` may take (about 40 s here with the extras, from PyPI)."""

_KEPT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")
_NETWORK = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
"""Variables a clean environment inherits: the machine's, and how it reaches the package index (its
certificates and proxies, pip's PIP_* and uv's index settings), never this checkout's."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> None:
    """Skip locally; fail under CI=true, where every tool must be installed."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the packaging tests must run)")
    pytest.skip(reason)


@dataclass(frozen=True)
class Dist:
    wheel: Path
    sdist: Path


def build_dist(out: Path) -> Dist:
    """`python -m build` of this checkout into `out`: the sdist, then the wheel built from the sdist."""
    if importlib.util.find_spec("build") is None:
        unavailable(f"the `build` package is not installed: {INSTALL}")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    assert done.returncode == 0, f"python -m build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    (wheel,) = out.glob("contextfold-*.whl")
    (sdist,) = out.glob("contextfold-*.tar.gz")
    return Dist(wheel, sdist)


@pytest.fixture(scope="session")
def built_dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The wheel and sdist of this checkout, built once per run: pytest-xdist's workers share the folder
    above their own temporary folders, so the first one builds there (holding a lock: two builds at once
    would write the same egg-info in the checkout) and the others take its files."""
    import fcntl

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    out = shared / "contextfold-dist"
    with open(shared / "contextfold-dist.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if out.is_dir() and len(list(out.glob("contextfold-*"))) == 2:
            (wheel,) = out.glob("contextfold-*.whl")
            (sdist,) = out.glob("contextfold-*.tar.gz")
            return Dist(wheel, sdist)
        shutil.rmtree(out, ignore_errors=True)
        return build_dist(out)


def clean_env(home: Path, *, path_first: Sequence[Path] = (), **extra: str) -> dict[str, str]:
    """An environment with nothing of this checkout in it: no PYTHONPATH, no CONTEXTFOLD_* settings,
    HOME and the XDG folders in `home`, `path_first` ahead of PATH."""
    kept = (*_KEPT, *_NETWORK, *(name.lower() for name in _NETWORK))
    env = {name: os.environ[name] for name in kept if name in os.environ}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("PIP_", "UV_INDEX", "UV_DEFAULT_INDEX"))})
    env["PATH"] = os.pathsep.join([*(str(p) for p in path_first), env.get("PATH", os.defpath)])
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
    )
    env.update(extra)
    return env


def base_python() -> str:
    """The interpreter a user would make a virtual environment with (not this test run's venv)."""
    return getattr(sys, "_base_executable", None) or sys.executable


def fresh_venv(wheel: Path, where: Path, extras: Sequence[str] = ()) -> Path:
    """A new virtual environment at `where` with `wheel[extras]` installed from the index; its bin folder."""
    home = where.parent / f"{where.name}-home"
    home.mkdir(parents=True, exist_ok=True)
    env = clean_env(home)
    made = subprocess.run([base_python(), "-m", "venv", str(where)], capture_output=True, text=True, env=env)
    assert made.returncode == 0, made.stderr
    bindir = where / ("Scripts" if os.name == "nt" else "bin")
    spec = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    done = subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "--quiet", spec],
        cwd=home,
        capture_output=True,
        text=True,
        env=env,
        timeout=INSTALL_TIMEOUT,
    )
    assert done.returncode == 0, f"pip install {spec} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return bindir


def uv_binary() -> Path:
    """`uv` from this test run's environment (pip install uv), or from PATH."""
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if found is None:
        unavailable(f"uv is not installed: {INSTALL}")
    return Path(str(found))
