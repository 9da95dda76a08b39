"""A virtual environment holding only what a bare GPU box has, to try eval/examples/gpu_kit.sh's kit here.

    python eval/examples/bare_box.py DIR [--with NAME ...]

Makes ``DIR`` (a venv without pip) whose site-packages links, from the running interpreter's
environment, the distributions listed in eval/examples/gpu_box_packages.txt (what the GPU box's
image holds; OpenCV as the box's headless build), the dependencies this environment's versions of
them need (their own ``Requires-Dist``, transitively: the box's versions bring theirs), and the
distributions named by ``--with`` (the kit's wheels, as if installed from them). Nothing else of this
project's dependencies is there: a run in it fails on any import the kit does not carry.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import re
import sys
import sysconfig
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
BOX_PACKAGES = HERE / "gpu_box_packages.txt"
# the box's names that this environment installs under another name
ALIASES = {"opencv-python-headless": "opencv-python"}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def box_packages(path: Path = BOX_PACKAGES) -> set[str]:
    """The bare box's distributions (normalised names)."""
    lines = (line.strip() for line in path.read_text().splitlines())
    return {normalise(line) for line in lines if line and not line.startswith("#")}


def _requires(dist: md.Distribution) -> set[str]:
    """A distribution's unconditional requirements (no extras, markers true here)."""
    from packaging.requirements import Requirement

    out = set()
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.add(normalise(req.name))
    return out


def closure(names: set[str], installed: dict[str, md.Distribution]) -> set[str]:
    """``names`` and what they require, transitively, among ``installed``."""
    todo, seen = [n for n in names if n in installed], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(r for r in _requires(installed[name]) if r in installed and r not in seen)
    return seen


def make(target: Path, extra: set[str]) -> set[str]:
    """The environment at ``target`` (made anew where it is one); returns the distributions linked."""
    if target.exists() and not (target / "pyvenv.cfg").exists() and any(target.iterdir()):
        raise SystemExit(f"bare_box.py: {target} exists and is not a virtual environment: give a new folder")
    venv.EnvBuilder(with_pip=False, clear=True).create(target)
    purelib = Path(sysconfig.get_paths(vars={"base": str(target), "platbase": str(target)})["purelib"])
    installed = {normalise(d.metadata["Name"]): d for d in md.distributions()}
    wanted = {ALIASES.get(n, n) for n in box_packages() | {normalise(n) for n in extra}}
    linked = closure(wanted, installed)
    source = Path(sysconfig.get_paths()["purelib"])
    for name in sorted(linked):
        for top in {Path(str(f)).parts[0] for f in installed[name].files or []}:
            if top.startswith("..") or top == "bin" or not (source / top).exists():
                continue
            if not (purelib / top).exists():
                os.symlink(source / top, purelib / top)
    return linked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bare_box.py", description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--with", dest="extra", action="append", default=[], metavar="NAME")
    args = parser.parse_args(argv)
    linked = make(args.target, set(args.extra))
    sys.stdout.write(f"{args.target}: {len(linked)} distributions linked from {sys.prefix}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
