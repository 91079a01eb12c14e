"""The wheel builds without a setuptools warning, and carries the data files the server reads at run time.

A folder that ships files but is not listed as a package is copied today and dropped by a future
setuptools ("package would be ignored"); the warning is the only notice, so the build here fails on it.
The build runs on a copy of the project, so that it leaves no `build/` or `.egg-info` in the checkout.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHIPPED = ("voice", "server", "session", "brain", "schemas", "clients", "privates")
# Read at run time through importlib.resources or a path beside the module.
DATA = ("schemas/data/jaipur-bazaar/manifest.json", "schemas/data/jaipur-bazaar/knowledge/phrases.md",
        "schemas/data/numbers/en.json", "clients/browser/lobby.html", "clients/browser/vendor/uPlot-LICENSE.txt")


@pytest.mark.slow
def test_the_wheel_builds_without_warnings_and_carries_its_data(tmp_path: pathlib.Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    for package in SHIPPED:
        shutil.copytree(ROOT / package, project / package,
                        ignore=shutil.ignore_patterns("__pycache__", "bin", "obj", "node_modules"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                            "-w", str(tmp_path / "dist"), str(project)],
                           capture_output=True, text=True, timeout=300)
    output = built.stdout + built.stderr
    assert built.returncode == 0, output[-3000:]
    warnings = [line.strip() for line in output.splitlines() if "warning" in line.lower()]
    assert warnings == [], "\n".join(warnings)
    (wheel,) = (tmp_path / "dist").glob("samvad-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [path for path in DATA if path not in names] == []
    assert "server/app.py" in names and "clients/bots/__init__.py" in names
