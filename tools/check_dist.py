"""Check the built sdist and wheel (``make dist`` runs this after build and twine).

1. The wheel holds every module and runtime file of the source tree's package
   (Python modules, the Lua scripts, the dashboard's templates, ``py.typed``), and
   no test code (``tests/``, ``examples/``, ``conftest.py``, ``test_*.py``).
2. The sdist holds the same package files, and the LICENSE.
3. The wheel, installed with its ``embedded`` and ``dashboard`` extras into a fresh
   virtualenv in a temporary directory, passes tools/smoke_dist.py run from there.

Usage: python tools/check_dist.py DIST_FOLDER
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import venv
import zipfile
from pathlib import Path
from typing import List, Set

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "minitask"
#: what a runtime file of the package is; anything else in its folders is not shipped
SHIPPED_SUFFIXES = {".py", ".lua", ".html", ".typed"}


def package_files() -> Set[str]:
    """The package's files that must ship, as paths inside the wheel."""
    found = set()
    for path in PACKAGE.rglob("*"):
        if path.is_file() and path.suffix in SHIPPED_SUFFIXES and "__pycache__" not in path.parts:
            found.add(path.relative_to(ROOT).as_posix())
    return found


def is_test_code(name: str) -> bool:
    parts = name.split("/")
    return (parts[0] in {"tests", "examples", "tools", "benchmarks"}
            or parts[-1] == "conftest.py" or parts[-1].startswith("test_"))


def check_wheel(wheel: Path, wanted: Set[str]) -> List[str]:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    problems = [f"{wheel.name} lacks {name}" for name in sorted(wanted - names)]
    problems += [f"{wheel.name} ships test code: {name}"
                 for name in sorted(names) if is_test_code(name)]
    for kind, folder in (("Lua scripts", "minitask/stores/lua/"),
                         ("dashboard templates", "minitask/dashboard/templates/")):
        if not any(name.startswith(folder) for name in names):  # whatever the tree holds
            problems.append(f"{wheel.name} has no {kind}")
    return problems


def check_sdist(sdist: Path, wanted: Set[str]) -> List[str]:
    with tarfile.open(sdist) as archive:
        top = sdist.name[:-len(".tar.gz")]
        names = {name[len(top) + 1:] for name in archive.getnames()}
    needed = wanted | {"LICENSE", "setup.cfg", "pyproject.toml", "README.rst",
                       "CHANGELOG.rst", "SECURITY.rst", "tests/golden/make_golden.py"}
    return [f"{sdist.name} lacks {name}" for name in sorted(needed - names)]


def smoke(wheel: Path, version: str) -> None:
    with tempfile.TemporaryDirectory(prefix="minitask-dist-") as folder:
        place = Path(folder)
        started = time.monotonic()
        venv.EnvBuilder(with_pip=True).create(place / "venv")
        python = place / "venv" / "bin" / "python"
        subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                        f"{wheel}[embedded,dashboard]"], check=True, cwd=place)
        print(f"check_dist: installed {wheel.name} in {place / 'venv'} "
              f"({time.monotonic() - started:.0f} s)")
        work = place / "work"
        work.mkdir()
        shutil.copy(ROOT / "tools" / "smoke_dist.py", work / "smoke_dist.py")
        env = {key: value for key, value in os.environ.items()
               if key not in {"PYTHONPATH", "MINITASK_BROKER_URL", "VIRTUAL_ENV"}}
        env["XDG_DATA_HOME"] = str(place / "data")  # its own embedded broker
        subprocess.run([str(python), "smoke_dist.py", str(ROOT), version], check=True,
                       cwd=work, env=env, timeout=300)


def main(dist: str) -> int:
    folder = Path(dist).resolve()
    wheels = sorted(folder.glob("minitask-*.whl"))
    sdists = sorted(folder.glob("minitask-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"check_dist: expected one wheel and one sdist in {folder}, found "
              f"{[p.name for p in wheels + sdists]}", file=sys.stderr)
        return 1
    wanted = package_files()
    problems = check_wheel(wheels[0], wanted) + check_sdist(sdists[0], wanted)
    if problems:
        print("check_dist: " + "\ncheck_dist: ".join(problems), file=sys.stderr)
        return 1
    print(f"check_dist: {wheels[0].name} and {sdists[0].name} hold the package's "
          f"{len(wanted)} files; the wheel holds no test code")
    version = wheels[0].name.split("-")[1]
    smoke(wheels[0], version)
    print("check_dist: the installed wheel passed the smoke test")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1]))
