"""The installed package is a good neighbour: one import name (``eos_harness``), nothing that shadows
a user's own top-level ``models``/``faults``/``suites``/``harness`` packages, and a pytest plugin that
adds only namespaced options and fixtures."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"eos_harness": "harness", "eos_harness.models": "models", "eos_harness.faults": "faults",
           "eos_harness.suites": "suites"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_installed_under_eos_harness():
    setuptools = _pyproject()["tool"]["setuptools"]
    assert setuptools["package-dir"] == FOLDERS
    found = set()
    for name, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *relative.parts]))
    assert sorted(setuptools["packages"]) == sorted(found)


def test_a_regular_install_beside_a_users_own_models_package(tmp_path):
    """pip install (not editable) into a fresh environment, used from a project that has its own
    top-level ``models`` package: the user's ``import models`` and the harness both work."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "-w", str(wheels), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("eos_harness-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # The dependencies come from this environment's site-packages (a path, not a site dir: its
    # editable-install hooks are not run, so eos_harness comes from the wheel only).
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=300)
    installed = {p.name for p in site.iterdir()}
    assert "eos_harness" in installed
    assert not installed & {"models", "faults", "suites", "harness"}, "generic top-level names installed"

    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "__init__.py").write_text("OWNER = 'the user'\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    check = subprocess.run(
        [str(python), "-c", "import models, eos_harness.models.workloads as w, eos_harness.faces.cli; "
                            "print(models.OWNER, eos_harness.__file__, sorted(w.WORKLOADS)[0])"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("the user ")
    assert str(site) in check.stdout  # the harness from the wheel, not from this checkout

    run = subprocess.run([str(venv / "bin" / "eos-harness"), "run", "--store", "memory", "--seed", "1",
                          "--out", str(project / "run")], cwd=project, env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "verdict: pass" in run.stdout


def test_the_pytest_plugin_adds_only_namespaced_options_and_fixtures(pytester):
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--help")
    options = [line.split()[0] for line in result.stdout.lines
               if line.strip().startswith("--") and "eos" in line.lower()]
    assert options and all(o.startswith("--eos-") for o in options), options
    fixtures = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider")
    ours, section = [], None
    for line in fixtures.stdout.lines:
        if line.startswith("-") and "fixtures defined from" in line:
            section = line.split("fixtures defined from")[1].strip(" -")
        elif section and section.startswith("eos_harness") and " -- " in line and not line.startswith(" "):
            ours.append(line.split()[0])
    assert ours and all(name.startswith("eos_") for name in ours), ours


def _pins(name: str) -> dict[str, str]:
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            package, version = line.split("==")
            pins[canonicalize_name(package)] = version.strip()
    return pins


def test_pyproject_states_ranges_whose_floors_are_the_lowest_constraints_and_the_lock_is_inside_them():
    """A good neighbour: every dependency a range with a lower bound (no exact pin), the lower bounds
    are what ``make test-lowest`` installs, and constraints.txt (``make``, CI) pins a version in range."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = _pyproject()["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for extra, listed in project["optional-dependencies"].items()
                     if extra != "all" for r in listed]
    lowest, locked = _pins("constraints-lowest.txt"), _pins("constraints.txt")
    floors = {}
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        assert not any(s.operator in ("==", "===", "~=") for s in requirement.specifier), requirement
        (floor,) = [s.version for s in requirement.specifier if s.operator == ">="]
        floors[name] = floor
        assert requirement.specifier.contains(locked[name]), (requirement, locked[name])
    assert lowest == floors
