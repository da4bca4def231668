"""The images built offline: a Debian rootfs with Java 17 (debootstrap), then ``docker/Dockerfile``
with the pinned Kafka jars on it (the Kafka image), or ``docker/runner.Dockerfile`` with the harness and
PySpark installed from wheels built on this machine (the runner image: Spark master, Spark worker and
campaign driver of ``docker/nightly``); nothing is pulled from a registry.

``build_image()`` builds :data:`LOCAL_IMAGE` (``python -m eos_harness.cluster.docker build``),
``build_runner_image()`` builds :data:`RUNNER_IMAGE`; ``require_image()`` says how to get an image a cluster
asks for that the engine does not have.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from eos_harness.cluster.docker.containers import LABEL
from eos_harness.cluster.docker.engine import CLI, DockerError, docker_cache, docker_client
from eos_harness.cluster.local import KAFKA_BUNDLES, VERSION_ENV
from eos_harness.cluster.local import KAFKA_VERSION as _DEFAULT_KAFKA
from eos_harness.cluster.local import _tail_text as _tail

__all__ = ["BUILD_COMMAND", "DEFAULT_IMAGE", "KAFKA_VERSION", "LOCAL_IMAGE", "RUNNER_IMAGE", "BuildReport",
           "build_image", "build_runner_image", "image_present", "require_image", "runner_current",
           "source_fingerprint"]

# The Kafka of the local clusters: 4.4.0, or $EOS_KAFKA_VERSION (3.9.1); any other value is refused by the
# command line and pytest before this is read. docker/run picks Log4j 2 (4.x) or Log4j 1 (3.9) by the version.
_CHOSEN = os.environ.get(VERSION_ENV, "").strip()
KAFKA_VERSION = _CHOSEN if _CHOSEN in KAFKA_BUNDLES else _DEFAULT_KAFKA
DEFAULT_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
LOCAL_IMAGE = f"eos-harness/kafka:{KAFKA_VERSION}"
BUILD_COMMAND = f"{CLI} build"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("EOS_HARNESS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = ("openjdk-17-jre-headless",)
BASE_IMAGE = f"eos-harness/debian-jre17:{DEBIAN_SUITE}"
# The runner's base: Java 17 for Spark's JVMs, Debian's Python 3.11 for the harness and PySpark.
RUNNER_BASE_PACKAGES = (*BASE_PACKAGES, "python3", "python3-venv", "procps")
RUNNER_BASE_IMAGE = f"eos-harness/debian-jre17-python:{DEBIAN_SUITE}"
RUNNER_IMAGE = "eos-harness/runner:latest"
RUNNER_EXTRAS = "spark,kafka"
SOURCE_LABEL = "eos-harness.source"  # the runner image's label: source_fingerprint() of what it was built from
CHECKOUT = Path(__file__).resolve().parents[3]
DOCKER_DIR = CHECKOUT / "docker"


def image_present(client, image: str) -> bool:
    import docker

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def require_image(client, image: str, pull: bool) -> None:
    """Have ``image`` on the engine (pulling it if ``pull``), or raise saying how to build it offline."""
    if image_present(client, image):
        return
    if pull:
        try:
            client.images.pull(image)
            return
        except Exception as exc:  # noqa: BLE001 - no registry, no such tag, ...
            reason = f"pulling it failed ({exc})"
    else:
        reason = "pulling is off (DockerKafka(pull=True) pulls it from its registry)"
    raise DockerError(
        f"the Docker image {image} is not on this engine; {reason}. Build the equivalent image offline "
        f"(Debian packages and the cached Kafka jars): {BUILD_COMMAND} (or make docker-image), then use "
        f"DockerKafka(image={LOCAL_IMAGE!r})"
    )


@dataclass
class BuildReport:
    image: str
    base: str
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> seconds

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def build_image(tag: str = LOCAL_IMAGE, rebuild_base: bool = False,
                log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> BuildReport:
    """Build the Kafka image ``tag`` offline: a base imported from a Debian rootfs (debootstrap,
    with a Java 17 runtime; the rootfs tarball is cached in ``.cache/docker``), then
    ``docker/Dockerfile`` on it with the pinned Kafka jars. Nothing is pulled from a registry."""
    from eos_harness.jars import JarFetchError, ensure

    report = BuildReport(tag, BASE_IMAGE)
    client = docker_client(timeout=1800)
    try:
        started = time.perf_counter()
        try:
            jars = ensure(KAFKA_BUNDLES[KAFKA_VERSION].name)
        except JarFetchError as exc:
            raise DockerError(f"cannot build {tag}: {exc}") from None
        report.seconds["jars"] = time.perf_counter() - started
        _ensure_base(client, BASE_IMAGE, "jre17", BASE_PACKAGES, rebuild_base, report, log)
        started = time.perf_counter()
        _docker_build(client, tag, jars, log)
        report.seconds["docker build"] = time.perf_counter() - started
    finally:
        client.close()
    log(f"built {tag} in {report.total:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items()) + ")")
    return report


def _ensure_base(client, image: str, flavour: str, packages: tuple[str, ...], rebuild: bool, report: BuildReport,
                 log: Callable[[str], None]) -> None:
    """Have the base ``image``: imported from ``.cache/docker/rootfs-SUITE-FLAVOUR.tar``, made by debootstrap
    with ``packages`` when it is not cached (or ``rebuild``)."""
    if not rebuild and image_present(client, image):
        return
    rootfs = docker_cache() / f"rootfs-{DEBIAN_SUITE}-{flavour}.tar"
    if rebuild or not rootfs.exists():
        started = time.perf_counter()
        _debootstrap(rootfs, packages, log)
        report.seconds["debootstrap"] = time.perf_counter() - started
    started = time.perf_counter()
    log(f"importing {rootfs} as {image}")
    repository, _, base_tag = image.rpartition(":")
    client.api.import_image_from_file(str(rootfs), repository=repository, tag=base_tag)
    if not image_present(client, image):
        raise DockerError(f"docker import of {rootfs} did not produce {image}")
    report.seconds["import"] = time.perf_counter() - started


def _debootstrap(rootfs: Path, packages: tuple[str, ...], log: Callable[[str], None]) -> None:
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if os.access("/usr/sbin/debootstrap", os.X_OK)
                                                  else None)
    if debootstrap is None:
        raise DockerError("cannot build the base image: debootstrap is not installed (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise DockerError("cannot build the base image: debootstrap needs root")
    target = rootfs.with_suffix(".d")
    _remove_tree(target)
    command = [debootstrap, "--variant=minbase", "--components=main", f"--include={','.join(packages)}",
               DEBIAN_SUITE, str(target), DEBIAN_MIRROR]
    log("$ " + " ".join(command))
    try:
        proc = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            raise DockerError(f"debootstrap failed (exit {proc.returncode}) from {DEBIAN_MIRROR} "
                              f"(EOS_HARNESS_DEBIAN_MIRROR sets the mirror):\n{_tail(proc.stdout)}")
        if not (target / "usr" / "bin" / "java").exists():
            raise DockerError(f"debootstrap made {target} without /usr/bin/java:\n{_tail(proc.stdout)}")
        # What an image does not need: package caches and lists, documentation.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info"):
            for entry in (target / sub).glob("*"):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        partial = rootfs.with_suffix(".tar.part")
        tar = subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(target), "-cf", str(partial), "."],
                             stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if tar.returncode != 0:
            partial.unlink(missing_ok=True)
            raise DockerError(f"packing the rootfs {target} failed (tar exit {tar.returncode}): {tar.stderr[-2000:]}")
        partial.rename(rootfs)
        log(f"rootfs cached in {rootfs} ({rootfs.stat().st_size / 2**20:.0f} MiB)")
    finally:
        _remove_tree(target)


def _remove_tree(target: Path) -> None:
    """Remove a debootstrap target, unmounting first whatever a failed run left mounted in it."""
    if not target.exists():
        return
    prefix = str(target.resolve()) + "/"
    mounts = [partition.mountpoint for partition in psutil.disk_partitions(all=True)]
    for mount in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)
    shutil.rmtree(target, ignore_errors=True)


def _docker_build(client, tag: str, jars: list[Path], log: Callable[[str], None]) -> None:
    context = docker_cache() / "context"
    shutil.rmtree(context, ignore_errors=True)
    (context / "libs").mkdir(parents=True)
    try:
        for name in ("Dockerfile", "run", "log4j.properties", "tools-log4j.properties", "log4j2.properties",
                     "tools-log4j2.properties"):
            shutil.copy2(DOCKER_DIR / name, context / name)
        (context / "run").chmod(0o755)
        for jar in jars:
            shutil.copy2(jar, context / "libs" / jar.name)
        log(f"docker build -t {tag} (FROM {BASE_IMAGE}, {len(jars)} jars)")
        _run_build(client, context, tag, {"BASE": BASE_IMAGE, "KAFKA_VERSION": KAFKA_VERSION},
                   {LABEL + ".version": KAFKA_VERSION}, network_mode="host")
    finally:
        shutil.rmtree(context, ignore_errors=True)


def source_fingerprint() -> str:
    """A hash of what the runner image installs from this checkout: the package's folders, pyproject.toml and
    constraints.txt. A runner image whose label differs holds another harness (``runner_current``)."""
    import hashlib

    digest = hashlib.sha256()
    for top in ("harness", "models", "faults", "suites"):
        for path in sorted((CHECKOUT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.relative_to(CHECKOUT).as_posix().encode() + b"\0" + path.read_bytes())
    for name in ("pyproject.toml", "constraints.txt"):
        digest.update(name.encode() + b"\0" + (CHECKOUT / name).read_bytes())
    return digest.hexdigest()[:16]


def runner_current(client, tag: str = RUNNER_IMAGE) -> bool:
    """Whether the engine has the runner image ``tag`` built from this checkout as it is now."""
    import docker

    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return (image.labels or {}).get(SOURCE_LABEL) == source_fingerprint()


def build_runner_image(tag: str = RUNNER_IMAGE, rebuild_base: bool = False,
                       log: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> BuildReport:
    """Build the runner image ``tag`` offline: a base imported from a Debian rootfs with Java 17 and Python 3.11
    (debootstrap, cached in ``.cache/docker``), then ``docker/runner.Dockerfile``: a virtual environment in
    ``/opt/eos`` with this checkout's harness (``[spark,kafka]``: PySpark, confluent-kafka) installed from wheels
    built here by pip at the versions of ``constraints.txt`` (``.cache/docker/wheels``, kept). It runs a Spark
    master, a Spark worker (its executors' Python is the same) and the campaign driver."""
    report = BuildReport(tag, RUNNER_BASE_IMAGE)
    client = docker_client(timeout=1800)
    try:
        previous = client.images.get(tag).id if image_present(client, tag) else None
        _ensure_base(client, RUNNER_BASE_IMAGE, "jre17-python", RUNNER_BASE_PACKAGES, rebuild_base, report, log)
        started = time.perf_counter()
        wheels = _runner_wheels(log)
        report.seconds["wheels"] = time.perf_counter() - started
        started = time.perf_counter()
        context = docker_cache() / "runner-context"
        shutil.rmtree(context, ignore_errors=True)
        (context / "wheels").mkdir(parents=True)
        try:
            shutil.copy2(DOCKER_DIR / "runner.Dockerfile", context / "Dockerfile")
            shutil.copy2(CHECKOUT / "constraints.txt", context / "constraints.txt")
            for wheel in wheels:
                _link_or_copy(wheel, context / "wheels" / wheel.name)
            log(f"docker build -t {tag} (FROM {RUNNER_BASE_IMAGE}, {len(wheels)} wheels)")
            _run_build(client, context, tag, {"BASE": RUNNER_BASE_IMAGE, "EXTRAS": RUNNER_EXTRAS},
                       {SOURCE_LABEL: source_fingerprint()})
            # the install stage's image (the wheels and the build of the venv), dangling once the runner is built
            for stage in client.images.list(filters={"dangling": True, "label": "eos-harness.build-stage"}):
                with contextlib.suppress(Exception):
                    client.images.remove(stage.id, noprune=False)
            # the runner image this build replaced (its tag moved to the new one): removed unless something uses it
            if previous and previous != client.images.get(tag).id and not client.images.get(previous).tags:
                with contextlib.suppress(Exception):
                    client.images.remove(previous)
        finally:
            shutil.rmtree(context, ignore_errors=True)
        report.seconds["docker build"] = time.perf_counter() - started
    finally:
        client.close()
    log(f"built {tag} in {report.total:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items()) + ")")
    return report


def _runner_wheels(log: Callable[[str], None]) -> list[Path]:
    """The wheels of the harness (this checkout) and of everything it needs with ``[spark,kafka]``, at the
    versions of ``constraints.txt``: built by pip into ``.cache/docker/wheels`` (a wheel already there is
    reused; PySpark's, built from its source distribution, once); the harness's own wheel every time."""
    wheels = docker_cache() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for old in wheels.glob("eos_harness-*.whl"):
        old.unlink()
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels), "--find-links",
               str(wheels), "--constraint", str(CHECKOUT / "constraints.txt"), f"{CHECKOUT}[{RUNNER_EXTRAS}]"]
    log("$ " + " ".join(command))
    had_build = (CHECKOUT / "build").exists()
    proc = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          cwd=docker_cache())
    if not had_build:  # the build/ folder setuptools leaves in the checkout
        shutil.rmtree(CHECKOUT / "build", ignore_errors=True)
    if proc.returncode != 0:
        raise DockerError(f"pip could not build the runner's wheels (exit {proc.returncode}; PyPI is needed the "
                          f"first time):\n{_tail(proc.stdout)}")
    return sorted(wheels.glob("*.whl"))


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _run_build(client, context: Path, tag: str, buildargs: dict[str, str], labels: dict[str, str],
               network_mode: str = "none") -> None:
    stream = client.api.build(path=str(context), tag=tag, rm=True, forcerm=True, decode=True, network_mode=network_mode,
                              pull=False, buildargs=buildargs, labels=labels)
    lines: list[str] = []
    for chunk in stream:
        if "error" in chunk:
            raise DockerError(f"docker build of {tag} failed: {chunk['error'].strip()}\n" + "\n".join(lines[-15:]))
        text = chunk.get("stream", "").rstrip()
        if text:
            lines.append(text)
    if not image_present(client, tag):
        raise DockerError(f"docker build did not produce {tag}:\n" + "\n".join(lines[-15:]))
