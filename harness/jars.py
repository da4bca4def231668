"""Pinned JVM artifacts (the Kafka broker, Spark's Kafka connector) fetched from Maven Central.

Each :class:`Bundle` names Maven coordinates at a pinned version. ``ensure(name)`` returns the
bundle's jar files, fetching them once (with their runtime dependencies) through Maven into the
git-ignored cache directory; afterwards everything works offline. The cache is
``$EOS_HARNESS_CACHE`` if set, else ``.cache/`` in the project checkout, else
``~/.cache/eos-harness``.

Each jar is checked against the SHA-1 Maven Central publishes for it (its ``.sha1``, fetched with the
jar and kept in the bundle folder's ``checksums.json``) every time the bundle is used: a jar that
does not match (truncated, corrupted) is fetched again from Maven Central once, and if that fails
the error names the file and the command that clears the bundle.

``python -m eos_harness.jars [BUNDLE …]`` fetches and verifies bundles ahead of time (``make test`` does).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BUNDLES", "Bundle", "JarFetchError", "cache_dir", "corrupt_jars", "ensure"]

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
CHECKSUMS = "checksums.json"  # in a bundle folder: jar name -> {"url": Maven Central URL, "sha1": published SHA-1}
DOWNLOAD_TIMEOUT_S = 60
SHA1_FETCHES = 16  # the published SHA-1s of a bundle's jars fetched at once


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
    cache_folder: str = ""  # the folder in the cache, when not ``<name>-<version>``

    @property
    def folder(self) -> str:
        return self.cache_folder or f"{self.name}-{self.version}"


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
    from xml.sax.saxutils import escape  # on first use: it imports urllib.request (http.client, ssl, email)

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
    """The bundle's jars if already fetched, else an empty list (never fetches, never verifies)."""
    folder = cache_dir() / "jars" / BUNDLES[name].folder
    if not (folder / ".complete").exists():
        return []
    return sorted(folder.glob("*.jar"))


def _sha1(path: Path) -> str:
    digest = hashlib.sha1()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _download(url: str) -> bytes:
    import urllib.request  # on first use: http.client, ssl and email are not needed to start a command

    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
        return response.read()


def _published_sha1(url: str) -> str:
    """The SHA-1 Maven Central publishes for the file at ``url`` (its ``.sha1``: the hex digest,
    sometimes followed by the file name)."""
    text = _download(url + ".sha1").decode("ascii", "replace").strip()
    digest = text.split()[0].lower() if text else ""
    if len(digest) != 40 or any(c not in "0123456789abcdef" for c in digest):
        raise JarFetchError(f"{url}.sha1 is not a SHA-1 ({text[:80]!r})")
    return digest


def _checksums(folder: Path) -> dict[str, dict[str, str]] | None:
    try:
        return json.loads((folder / CHECKSUMS).read_text())
    except (OSError, ValueError):
        return None


def corrupt_jars(name: str) -> list[str]:
    """The jars of a fetched bundle that are missing or do not match Maven Central's SHA-1, each as
    ``"<file>: <what is wrong>"`` (empty when all match)."""
    folder = cache_dir() / "jars" / BUNDLES[name].folder
    checksums = _checksums(folder) or {}
    problems = []
    for jar, entry in sorted(checksums.items()):
        path = folder / jar
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif (actual := _sha1(path)) != entry["sha1"]:
            problems.append(f"{path}: SHA-1 {actual} ({path.stat().st_size} bytes), Maven Central says {entry['sha1']}")
    return problems


def _clear_command(bundle: Bundle) -> str:
    return f"rm -rf {cache_dir() / 'jars' / bundle.folder} && python -m eos_harness.jars {bundle.name}"


def _refetch_corrupt(bundle: Bundle, folder: Path, checksums: dict[str, dict[str, str]]) -> None:
    """Fetch each jar that does not match its SHA-1 again from Maven Central, once; a jar that still
    does not match raises :class:`JarFetchError` naming the file and the command that clears the bundle."""
    for jar, entry in sorted(checksums.items()):
        path = folder / jar
        if path.is_file() and _sha1(path) == entry["sha1"]:
            continue
        try:
            data = _download(entry["url"])
        except OSError as exc:
            raise JarFetchError(
                f"{path} is corrupt or missing (it does not match Maven Central's SHA-1 {entry['sha1']}) and "
                f"fetching it again from {entry['url']} failed ({exc}); clear the bundle and fetch it again "
                f"with: {_clear_command(bundle)}") from None
        if hashlib.sha1(data).hexdigest() != entry["sha1"]:
            raise JarFetchError(
                f"{path} is corrupt and the copy fetched again from {entry['url']} does not match Maven "
                f"Central's SHA-1 {entry['sha1']} either; clear the bundle and fetch it again with: "
                f"{_clear_command(bundle)}")
        temporary = path.with_name(f".{jar}.part")
        temporary.write_bytes(data)
        os.replace(temporary, path)  # atomic: a JVM that has the old file open keeps reading it
        print(f"eos-harness: {path} did not match Maven Central's SHA-1; fetched it again", file=sys.stderr)


def ensure(name: str, quiet: bool = True) -> list[Path]:
    """The jars of bundle ``name``, fetched from Maven Central on first use and checked against
    Maven Central's SHA-1 on every use (a corrupt jar is fetched again, once)."""
    if name not in BUNDLES:
        raise JarFetchError(f"unknown jar bundle {name!r}; known: {', '.join(sorted(BUNDLES)) or 'none'}")
    bundle = BUNDLES[name]
    found = jars(name)
    folder = cache_dir() / "jars" / bundle.folder
    checksums = _checksums(folder) if found else None
    if checksums is not None:
        if corrupt_jars(name):
            _refetch_corrupt(bundle, folder, checksums)
        return jars(name)
    # Not fetched yet, or fetched by a version without checksums: fetch (Maven's local repository
    # makes a second fetch an offline copy).
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
        layout = work_path / "layout"  # group/artifact/version/file.jar: the path on Maven Central
        command = [
            mvn, "-B", "-f", str(work_path / "pom.xml"),
            "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
            f"-DoutputDirectory={layout}", "-DincludeScope=runtime", "-Dmdep.useRepositoryLayout=true",
        ]
        if quiet:
            command.insert(2, "-q")
        if bundle.exclude_groups:
            command.append(f"-DexcludeGroupIds={','.join(bundle.exclude_groups)}")
        if bundle.exclude_artifacts:
            command.append(f"-DexcludeArtifactIds={','.join(bundle.exclude_artifacts)}")
        proc = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0 or not list(layout.rglob("*.jar")):
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise JarFetchError(
                f"fetching the {bundle.name} jars ({', '.join(bundle.artifacts)}) from Maven Central failed "
                f"(mvn exit {proc.returncode}); check the network to Maven Central, then run "
                f"'python -m eos_harness.jars {bundle.name}' again. Maven said:\n{tail}"
            )
        out.mkdir()
        paths = sorted(layout.rglob("*.jar"))
        urls = [f"{MAVEN_CENTRAL}/{path.relative_to(layout).as_posix()}" for path in paths]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=SHA1_FETCHES) as pool:  # one round trip each: many at once
            published = [pool.submit(_published_sha1, url) for url in urls]
        checksums = {}
        for path, url, sha1 in zip(paths, urls, published, strict=True):
            try:
                checksums[path.name] = {"url": url, "sha1": sha1.result()}
            except OSError as exc:
                raise JarFetchError(f"cannot fetch the SHA-1 of {path.name} from {url}.sha1 ({exc}); check the "
                                    f"network to Maven Central, then run 'python -m eos_harness.jars {bundle.name}' "
                                    "again") from None
            path.rename(out / path.name)
        (out / CHECKSUMS).write_text(json.dumps(checksums, indent=1, sort_keys=True) + "\n")
        _refetch_corrupt(bundle, out, checksums)  # a corrupt copy in Maven's local repository
        (out / ".complete").write_text("\n".join(bundle.artifacts) + "\n")
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)
    return jars(name)


def _load_bundles() -> None:
    """Import the modules that register bundles (each integration declares its own)."""
    import importlib

    for module in ("eos_harness.cluster", "eos_harness.spark", "eos_harness.kafka_streams.bundles"):
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
        print(f"{name}: {len(found)} jars in {found[0].parent if found else '-'}, each matching Maven Central's SHA-1")
    return 0


if __name__ == "__main__":
    # Run through the imported module: bundles register in ``eos_harness.jars.BUNDLES``, not in ``__main__``'s.
    from eos_harness.jars import main as _main

    sys.exit(_main(sys.argv[1:]))
