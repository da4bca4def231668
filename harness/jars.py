"""Pinned JVM artifacts (the Kafka broker, Spark's Kafka connector) fetched from Maven Central.

Each :class:`Bundle` names Maven coordinates at a pinned version. ``ensure(name)`` returns the
bundle's jar files, fetching them once (with their runtime dependencies) through Maven into the
git-ignored cache directory; afterwards everything works offline. The cache is
``$EOS_HARNESS_CACHE`` if set, else ``.cache/`` in the project checkout, else
``~/.cache/eos-harness``.

``python -m harness.jars [BUNDLE …]`` fetches bundles ahead of time (``make test`` does).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = ["BUNDLES", "Bundle", "JarFetchError", "cache_dir", "ensure"]


class JarFetchError(RuntimeError):
    """The jars of a bundle could not be fetched; the message says why and what to do."""


@dataclass(frozen=True)
class Bundle:
    """A set of Maven artifacts fetched together with their runtime dependencies."""

    name: str
    version: str  # the bundle's own version, part of its cache folder name
    artifacts: tuple[str, ...]  # group:artifact:version
    exclude_groups: tuple[str, ...] = ()
    exclude_artifacts: tuple[str, ...] = ()
    description: str = field(default="", compare=False)

    @property
    def folder(self) -> str:
        return f"{self.name}-{self.version}"


BUNDLES: dict[str, Bundle] = {}


def register(bundle: Bundle) -> Bundle:
    BUNDLES[bundle.name] = bundle
    return bundle


def cache_dir() -> Path:
    env = os.environ.get("EOS_HARNESS_CACHE")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache"
    return Path.home() / ".cache" / "eos-harness"


def _pom(bundle: Bundle) -> str:
    deps = []
    for coordinate in bundle.artifacts:
        group, artifact, version = coordinate.split(":")
        deps.append(
            f"<dependency><groupId>{escape(group)}</groupId><artifactId>{escape(artifact)}</artifactId>"
            f"<version>{escape(version)}</version></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>eos-harness.fetch</groupId><artifactId>{escape(bundle.name)}</artifactId>"
        f"<version>1</version><packaging>pom</packaging><dependencies>{''.join(deps)}</dependencies></project>"
    )


def jars(name: str) -> list[Path]:
    """The bundle's jars if already fetched, else an empty list (never fetches)."""
    folder = cache_dir() / "jars" / BUNDLES[name].folder
    if not (folder / ".complete").exists():
        return []
    return sorted(folder.glob("*.jar"))


def ensure(name: str, quiet: bool = True) -> list[Path]:
    """The jars of bundle ``name``, fetched from Maven Central on first use."""
    if name not in BUNDLES:
        raise JarFetchError(f"unknown jar bundle {name!r}; known: {', '.join(sorted(BUNDLES)) or 'none'}")
    found = jars(name)
    if found:
        return found
    bundle = BUNDLES[name]
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarFetchError(
            f"cannot fetch the {bundle.name} jars: Maven ('mvn') is not installed. Install it "
            "(apt-get install maven) or put the jars in " + str(cache_dir() / "jars" / bundle.folder)
        )
    target = cache_dir() / "jars" / bundle.folder
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"fetch-{bundle.name}-", dir=target.parent) as work:
        work_path = Path(work)
        (work_path / "pom.xml").write_text(_pom(bundle))
        out = work_path / "jars"
        command = [
            mvn, "-B", "-f", str(work_path / "pom.xml"),
            "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
            f"-DoutputDirectory={out}", "-DincludeScope=runtime",
        ]
        if quiet:
            command.insert(2, "-q")
        if bundle.exclude_groups:
            command.append(f"-DexcludeGroupIds={','.join(bundle.exclude_groups)}")
        if bundle.exclude_artifacts:
            command.append(f"-DexcludeArtifactIds={','.join(bundle.exclude_artifacts)}")
        proc = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0 or not list(out.glob("*.jar")):
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise JarFetchError(
                f"fetching the {bundle.name} jars ({', '.join(bundle.artifacts)}) from Maven Central failed "
                f"(mvn exit {proc.returncode}); check the network to Maven Central, then run "
                f"'python -m harness.jars {bundle.name}' again. Maven said:\n{tail}"
            )
        (out / ".complete").write_text("\n".join(bundle.artifacts) + "\n")
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)
    return jars(name)


def _load_bundles() -> None:
    """Import the modules that register bundles (each integration declares its own)."""
    import importlib

    for module in ("eos_harness.cluster", "eos_harness.spark"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a missing dependency inside the module is a real error
                raise


def main(argv: list[str]) -> int:
    _load_bundles()
    names = argv or sorted(BUNDLES)
    for name in names:
        try:
            found = ensure(name, quiet=True)
        except JarFetchError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{name}: {len(found)} jars in {found[0].parent if found else '-'}")
    return 0


if __name__ == "__main__":
    # Run through the imported module: bundles register in ``harness.jars.BUNDLES``, not in ``__main__``'s.
    from eos_harness.jars import main as _main

    sys.exit(_main(sys.argv[1:]))
