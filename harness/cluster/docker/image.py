"""The Kafka image built offline: a Debian rootfs with Java 17 (debootstrap), then ``docker/Dockerfile``
with the pinned Kafka jars on it; nothing is pulled from a registry.

``build_image()`` builds :data:`LOCAL_IMAGE` (``python -m eos_harness.cluster.docker build``);
``require_image()`` says how to get an image a cluster asks for that the engine does not have.
"""

from __future__ import annotations

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
from eos_harness.cluster.local import KAFKA_BUNDLES
from eos_harness.cluster.local import _tail_text as _tail

__all__ = ["BUILD_COMMAND", "DEFAULT_IMAGE", "LOCAL_IMAGE", "BuildReport", "build_image", "image_present",
           "require_image"]

# The Docker path stays on Kafka 3.9.1 (its docker/run and log4j files are Log4j 1's, as 3.9 reads them);
# the local clusters default to 4.4.0 (eos_harness.cluster.local.KAFKA_VERSION).
KAFKA_VERSION = "3.9.1"
DEFAULT_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
LOCAL_IMAGE = f"eos-harness/kafka:{KAFKA_VERSION}"
BUILD_COMMAND = f"{CLI} build"
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("EOS_HARNESS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
BASE_PACKAGES = ("openjdk-17-jre-headless",)
BASE_IMAGE = f"eos-harness/debian-jre17:{DEBIAN_SUITE}"
DOCKER_DIR = Path(__file__).resolve().parents[3] / "docker"


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
        if rebuild_base or not image_present(client, BASE_IMAGE):
            rootfs = docker_cache() / f"rootfs-{DEBIAN_SUITE}-jre17.tar"
            if rebuild_base or not rootfs.exists():
                started = time.perf_counter()
                _debootstrap(rootfs, log)
                report.seconds["debootstrap"] = time.perf_counter() - started
            started = time.perf_counter()
            log(f"importing {rootfs} as {BASE_IMAGE}")
            repository, _, base_tag = BASE_IMAGE.rpartition(":")
            client.api.import_image_from_file(str(rootfs), repository=repository, tag=base_tag)
            if not image_present(client, BASE_IMAGE):
                raise DockerError(f"docker import of {rootfs} did not produce {BASE_IMAGE}")
            report.seconds["import"] = time.perf_counter() - started
        started = time.perf_counter()
        _docker_build(client, tag, jars, log)
        report.seconds["docker build"] = time.perf_counter() - started
    finally:
        client.close()
    log(f"built {tag} in {report.total:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items()) + ")")
    return report


def _debootstrap(rootfs: Path, log: Callable[[str], None]) -> None:
    debootstrap = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if os.access("/usr/sbin/debootstrap", os.X_OK)
                                                  else None)
    if debootstrap is None:
        raise DockerError("cannot build the base image: debootstrap is not installed (apt-get install debootstrap)")
    if os.geteuid() != 0:
        raise DockerError("cannot build the base image: debootstrap needs root")
    target = rootfs.with_suffix(".d")
    _remove_tree(target)
    command = [debootstrap, "--variant=minbase", "--components=main", f"--include={','.join(BASE_PACKAGES)}",
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
        for name in ("Dockerfile", "run", "log4j.properties", "tools-log4j.properties"):
            shutil.copy2(DOCKER_DIR / name, context / name)
        (context / "run").chmod(0o755)
        for jar in jars:
            shutil.copy2(jar, context / "libs" / jar.name)
        log(f"docker build -t {tag} (FROM {BASE_IMAGE}, {len(jars)} jars)")
        stream = client.api.build(path=str(context), tag=tag, rm=True, forcerm=True, decode=True,
                                  network_mode="host", pull=False,
                                  buildargs={"BASE": BASE_IMAGE, "KAFKA_VERSION": KAFKA_VERSION},
                                  labels={LABEL + ".version": KAFKA_VERSION})
        lines: list[str] = []
        for chunk in stream:
            if "error" in chunk:
                raise DockerError(f"docker build of {tag} failed: {chunk['error'].strip()}\n" + "\n".join(lines[-15:]))
            text = chunk.get("stream", "").rstrip()
            if text:
                lines.append(text)
        if not image_present(client, tag):
            raise DockerError(f"docker build did not produce {tag}:\n" + "\n".join(lines[-15:]))
    finally:
        shutil.rmtree(context, ignore_errors=True)
