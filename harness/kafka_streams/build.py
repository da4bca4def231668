"""The JVM side of Kafka Streams' stores, built on first use into the cache (beside the jars).

For each Kafka Streams version: the store server's Java source (``java/`` beside this module)
compiled with ``javac`` against that version's pinned jars (:mod:`eos_harness.kafka_streams.bundles`),
RocksDB's native library taken out of ``rocksdbjni`` once (so that no JVM unpacks it into the temp
directory at each start, and none leaves it there when killed), the crash points woven into copies of
Kafka's classes (``<server>-points.jar``, first on the class path: :mod:`eos_harness.kafka_streams.points`),
and the Byteman rules of the mutants (:mod:`eos_harness.kafka_streams.mutant_rules`). Everything lands in
``<cache>/kafka-streams/server-<version>-<digest of the source and rules>/`` (or under
``$EOS_HARNESS_KAFKA_STREAMS_BUILD``), written in a temp folder
and renamed into place, so a build that stops half way leaves nothing that looks built, and two
processes building at once both end with the same folder. Then, once per JDK the store JVMs run on
(:func:`store_java`), what they map instead of loading their classes: on Java 25 on an AOT cache, else a
class-data-sharing archive (:func:`_shared_classes`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from eos_harness import jars
from eos_harness.kafka_streams import bundles, points

__all__ = ["BUILD_ENV", "JAVA_ENV", "JAVA_SOURCE", "BuildError", "Java", "Server", "ensure_built", "jvm_environment",
           "publish", "store_java"]

JAVA_SOURCE = Path(__file__).resolve().parent / "java"
NATIVE = "librocksdbjni-linux64.so"  # what rocksdbjni's loader looks for on java.library.path first
MAIN = "eosharness.StoreServer"
LAYOUT = 6  # what a build folder holds (part of its name: a new layout is built afresh)
ARCHIVE = "server.jsa"  # the class-data-sharing archive of a store JVM's classes (a start maps them)
# A store's JVM: small and quick to start (C1 only; one GC thread); the stores hold a few keys. Most JVMs
# live for one crash: C1 compiles a method after three times the usual calls (its compiler thread was a third
# of a JVM's CPU, Byteman's and RocksDB's start-up code compiled and run a few times: 0.43 -> 0.38 CPU-s).
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:CompileThresholdScaling=3", "-XX:+UseSerialGC", "-Xss1m", "-Xmx256m",
               "-XX:-UsePerfData",
               "-XX:+UnlockDiagnosticVMOptions",
               "-Xlog:disable", "-Xlog:all=warning:stderr")  # the JVM's own warnings never on the protocol's stdout
# The classes loaded from jars (Kafka's, RocksDB's, Byteman's: the pinned jars, checked against their SHA-1;
# those the class-data archive holds were verified when it was dumped) are not verified again, as the
# JDK's own are not: each crash costs a JVM start, and verifying was a fifth of a start with a point armed
# (0.50 -> 0.40 CPU-s per JVM life). A JVM that loads a user's store (``verify=True``) verifies them all.
NO_VERIFY = "-XX:-BytecodeVerificationRemote"


JAVA_ENV = "EOS_HARNESS_STORE_JAVA"  # the java store JVMs run on: a java binary, or a JDK's home
AOT_FEATURE = 25  # from this Java on, a store JVM maps an AOT cache (JEP 483 and 515) instead of the CDS archive
JVM_HOMES = "/usr/lib/jvm"  # where Debian's and Adoptium's packages install JDKs (looked at for a Java 25)


@dataclass(frozen=True)
class Java:
    """A java binary and the runtime version its JDK's ``release`` file names ("" when it has none)."""

    path: str
    version: str

    @property
    def feature(self) -> int:
        head = self.version.split(".")[0].split("+")[0].split("-")[0]
        return int(head) if head.isdigit() else 0

    @property
    def aot(self) -> bool:
        """Whether its store JVMs map an AOT cache (Java 25 on), trained once per build and Java."""
        return self.feature >= AOT_FEATURE


def _java_at(path: str | None) -> Java | None:
    """The Java of the binary ``path`` (a name on PATH, or a path), None when there is none."""
    found = shutil.which(path) if path else None
    if found is None:
        return None
    real = Path(found).resolve()
    release: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in (real.parent.parent / "release").read_text().splitlines():
            key, _, value = line.partition("=")
            release[key.strip()] = value.strip().strip('"')
    return Java(str(real), release.get("JAVA_RUNTIME_VERSION") or release.get("JAVA_VERSION", ""))


_java: dict[tuple[str, str, str], Java] = {}


def store_java() -> Java:
    """The java the store JVMs run on. ``$EOS_HARNESS_STORE_JAVA`` (a java binary or a JDK's home) when set;
    else the first Java 25 or later of the ``java`` on PATH, ``$JAVA_HOME``'s and those under /usr/lib/jvm
    (its AOT cache cuts a store JVM's life, and every crash is one: 0.25 -> 0.19-0.21 CPU-s); else the ``java``
    on PATH (17 or later), with the class-data archive. Kafka's stores are the same jars on either. Raises
    :class:`BuildError` for an ``$EOS_HARNESS_STORE_JAVA`` that is no java, or no java at all."""
    given = os.environ.get(JAVA_ENV, "")
    key = (given, os.environ.get("PATH", ""), os.environ.get("JAVA_HOME", ""))
    if key in _java:
        return _java[key]
    if given:
        home = Path(given)
        found = _java_at(str(home / "bin" / "java") if home.is_dir() else given)
        if found is None:
            raise BuildError(f"{JAVA_ENV}={given}: no java there (give a java binary or a JDK's home)")
    else:
        on_path = _java_at("java")
        homes = [os.environ["JAVA_HOME"]] if os.environ.get("JAVA_HOME") else []
        homes += sorted(str(p) for p in Path(JVM_HOMES).glob("*") if p.is_dir()) if Path(JVM_HOMES).is_dir() else []
        candidates = [on_path, *(_java_at(str(Path(home) / "bin" / "java")) for home in homes)]
        found = next((java for java in candidates if java is not None and java.aot), on_path)
        if found is None:
            raise BuildError("Kafka Streams' stores need a JDK (java and javac, 17 or later) on PATH; install one "
                             "(apt-get install openjdk-17-jdk-headless)")
    _java[key] = found
    return found


def jvm_environment() -> dict[str, str]:
    """The environment of a store JVM: this process's, with ``ROCKSDB_MUSL_LIBC=false``. Without it RocksDB's
    loader asks, at each JVM's first store, whether the C library is musl by running ``sh -c 'ldd /usr/bin/env |
    grep -q musl'`` (eight programs started: 0.02 CPU-s of a JVM life, and the wait); the build took the glibc
    library out of ``rocksdbjni`` (:data:`NATIVE`), which is what the answer picks."""
    return {**os.environ, "ROCKSDB_MUSL_LIBC": "false"}


class BuildError(RuntimeError):
    """The JVM side could not be built (no JDK, a jar fetch failed, javac failed); the message says why."""


@dataclass(frozen=True)
class Server:
    """A built store server for one Kafka Streams version: how to start its JVM."""

    version: str
    folder: Path
    classpath: tuple[Path, ...]
    byteman: Path
    jar: Path  # the store server's classes (beside the folder: its path is in the class-data archive)

    @property
    def rules(self) -> Path:
        return self.folder / "rules.btm"

    @property
    def woven(self) -> Path:
        """Kafka's classes with the crash points woven in (:func:`eos_harness.kafka_streams.points.weave_spec`),
        before Kafka's jars on the class path (beside the folder, as :attr:`jar`)."""
        return self.jar.with_name(self.jar.stem + "-points.jar")

    def aot_cache(self, java: Java) -> Path:
        """The AOT cache of this build's store JVMs on ``java`` (one per JDK build: a cache maps only there)."""
        digest = hashlib.sha256(f"{java.path} {java.version}".encode()).hexdigest()[:12]
        return self.folder / f"server-{digest}.aot"

    def command(self, java: str | None = None, verify: bool = False, points: bool = True,
                agent: bool = False) -> list[str]:
        """The command line of one store JVM. ``agent``: one that may open a mutant, started with the store
        server's own agent (``eosharness.Agent``: it keeps the JVM's Instrumentation, no class transformer),
        through which Byteman's agent with the mutant's rules is installed when a request opens it; a JVM
        without (every other: a Java agent at start was a tenth of a JVM life's CPU, 0.025 CPU-s) cannot. The
        crash points are woven into Kafka's classes (``points``: false, for a benchmark, Kafka's classes as they
        are, no point anywhere). ``verify``: the
        classes loaded from jars are verified (a JVM that may load a user's store), else not (:data:`NO_VERIFY`)."""
        archive = self.folder / ARCHIVE
        shared = [f"-XX:SharedArchiveFile={archive}", "-Xshare:auto"] if archive.is_file() else []
        if java is None:  # the store JVMs' java: on Java 25 on its AOT cache (none with an agent: it maps none then)
            runtime = store_java()
            java = runtime.path
            if runtime.aot:
                cache = self.aot_cache(runtime)
                shared = [f"-XX:AOTCache={cache}"] if cache.is_file() and not agent else []
        return [java, *JVM_OPTIONS, *([] if verify else [NO_VERIFY]), f"-Djava.library.path={self.folder / 'native'}",
                *shared,
                "-Dorg.jboss.byteman.compile.to.bytecode=true",  # rules run as bytecode, not interpreted
                f"-Deosharness.rules={self.rules}", *([f"-javaagent:{self.jar}"] if agent else []),
                "-cp", os.pathsep.join(str(p) for p in (self.jar, *([self.woven] if points else []), *self.classpath,
                                                        self.byteman)), MAIN]


def _digest(version: str) -> str:
    digest = hashlib.sha256(f"{version} {LAYOUT}".encode())
    for path in sorted(JAVA_SOURCE.rglob("*.java")):
        digest.update(path.relative_to(JAVA_SOURCE).as_posix().encode())
        digest.update(path.read_bytes())
    digest.update(points.rules_text(version).encode())
    digest.update(points.weave_spec().encode())
    return digest.hexdigest()[:12]


BUILD_ENV = "EOS_HARNESS_KAFKA_STREAMS_BUILD"  # where builds go instead of <cache>/kafka-streams (tests)


def _root() -> Path:
    return Path(os.environ[BUILD_ENV]) if os.environ.get(BUILD_ENV) else jars.cache_dir() / "kafka-streams"


_checked: dict[tuple[str, str], Server] = {}  # (build root, version) -> its server, jars checked in this process


def ensure_built(version: str) -> Server:
    """The store server of Kafka Streams ``version``, built on first use (jars fetched, and checked, as
    every bundle is, once per process: each store JVM's start asks for it). Raises :class:`BuildError`
    saying what is missing."""
    if version not in bundles.VERSIONS:
        raise BuildError(f"unknown Kafka Streams version {version!r}; known: {', '.join(bundles.VERSIONS)}")
    java = store_java()
    key = (str(_root()), version, java.path)
    known = _checked.get(key)
    if known is not None and (known.folder / ".complete").is_file() and known.jar.is_file() and known.woven.is_file():
        return known
    server = _ensure_built(version)
    _shared_classes(server, java)
    _checked[key] = server
    return server


def _ensure_built(version: str) -> Server:
    try:  # real paths: the class-data archive records the class path, and maps only under the same one
        classpath = tuple(p.resolve() for p in jars.ensure(bundles.streams_bundle(version)))
        byteman = jars.ensure("byteman")[0].resolve()
    except jars.JarFetchError as exc:
        raise BuildError(str(exc)) from None
    folder = _root().resolve() / f"server-{version}-{_digest(version)}"
    jar = folder.with_name(folder.name + ".jar")
    built = Server(version, folder, classpath, byteman, jar)
    if (folder / ".complete").is_file() and jar.is_file() and built.woven.is_file():
        return built
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        raise BuildError("Kafka Streams' stores need a JDK (java and javac, 17 or later) on PATH; install one "
                         "(apt-get install openjdk-17-jdk-headless)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".build-{version}-", dir=folder.parent))
    try:
        _build(version, work, (*classpath, byteman), javac, jar)
        _weave(Server(version, work, classpath, byteman, jar), java)
        publish(work, folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Server(version, folder, classpath, byteman, jar)


def publish(work: Path, folder: Path) -> None:
    """A build made in ``work`` becomes ``folder`` at once (marked complete), unless another process's
    complete build is there first: theirs is kept."""
    (work / ".complete").write_text(f"built {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
    try:
        os.rename(work, folder)
    except OSError:
        if not (folder / ".complete").is_file():
            raise


def _build(version: str, work: Path, classpath: tuple[Path, ...], javac: str, jar: Path) -> None:
    sources = sorted(str(p) for p in JAVA_SOURCE.rglob("*.java"))
    proc = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d", str(work / "classes"),
                           "-cp", os.pathsep.join(map(str, classpath)), *sources],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise BuildError(f"javac failed building the store server for Kafka Streams {version}:\n"
                         + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:]))
    # A jar (class-data sharing takes no folders), at its final path (the archive records it), written
    # under a temp name and renamed: a build beside this one writes the same bytes.
    with zipfile.ZipFile(work / "server.jar", "w") as archive:
        archive.writestr(zipfile.ZipInfo("META-INF/MANIFEST.MF"), AGENT_MANIFEST)
        for path in sorted((work / "classes").rglob("*.class")):
            archive.writestr(zipfile.ZipInfo(path.relative_to(work / "classes").as_posix()), path.read_bytes())
    os.replace(work / "server.jar", jar)
    shutil.rmtree(work / "classes")
    rocksdb = [p for p in classpath if p.name.startswith("rocksdbjni-")]
    if not rocksdb:
        raise BuildError(f"no rocksdbjni jar among the Kafka Streams {version} jars")
    (work / "native").mkdir()
    with zipfile.ZipFile(rocksdb[0]) as archive, archive.open(NATIVE) as source, \
            open(work / "native" / NATIVE, "wb") as target:
        shutil.copyfileobj(source, target)
    (work / "rules.btm").write_text(points.rules_text(version))


def _weave(server: Server, java: str) -> None:
    """Kafka's classes with the crash points woven in (``eosharness.Weave``), at their final path (the
    class-data archive records it), written under a temp name and renamed; what was woven where is in the
    folder's ``points.txt`` (a point woven nowhere is one this version of Kafka lacks)."""
    spec = server.folder / "points.tsv"
    spec.write_text(points.weave_spec())
    temp = server.woven.with_name(f".{server.woven.name}.{os.getpid()}")
    try:
        proc = subprocess.run([java, "-cp", os.pathsep.join(map(str, (server.jar, server.byteman))), "eosharness.Weave",
                               str(temp), str(spec), *map(str, server.classpath)],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise BuildError(f"weaving the crash points into Kafka Streams {server.version}'s classes failed:\n"
                             + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:]))
        (server.folder / "points.txt").write_text(proc.stdout)
        os.replace(temp, server.woven)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


# The store server's jar is also its JVM's agent (eosharness.Agent), with the capabilities Byteman's needs.
AGENT_MANIFEST = ("Manifest-Version: 1.0\nPremain-Class: eosharness.Agent\nAgent-Class: eosharness.Agent\n"
                  "Can-Redefine-Classes: true\nCan-Retransform-Classes: true\n\n")

WARM_UP = "".join(json.dumps(request) + "\n" for request in (
    {"op": "open", "kind": "rocksdb", "transactional": True, "state_dir": "{state}/r"},
    {"op": "put", "key": "YQ==", "value": "YQ=="}, {"op": "put_all", "entries": [["Yg==", None]]},
    {"op": "commit", "offsets": [["app-store-changelog", 0, 1]]}, {"op": "all"}, {"op": "rc_all"},
    {"op": "committed_offset", "topic": "app-store-changelog", "partition": 0}, {"op": "close"},
    {"op": "open", "kind": "memory", "transactional": True, "state_dir": "{state}/m"},
    {"op": "put", "key": "YQ==", "value": "YQ=="}, {"op": "commit", "offsets": [["app-store-changelog", 0, 1]]},
    {"op": "close"}, {"op": "exit"}))


def _shared_classes(server: Server, java: Java) -> None:
    """What a store JVM on ``java`` maps instead of loading its classes, made once per build and JDK into the
    build folder, by a training run of the classes a store JVM loads (each kind of store opened, written,
    committed, read and closed once): on Java 25 on its AOT cache (:meth:`Server.aot_cache`: the classes
    linked, and their methods' profiles; JEP 483 and 515: a store JVM's life 0.25 -> 0.19-0.21 CPU-s), else
    the class-data-sharing archive (:data:`ARCHIVE`). Trained without the Byteman agent (a JVM with an agent
    dumps none; with one, a JVM maps the archive's classes the agent leaves alone, and no AOT cache) and
    verifying (a JVM that verifies maps only what was dumped so; one that does not, any). Written under a temp
    name, checked by a start that must map it, and renamed into place. Best effort: what cannot be made leaves
    a marker (no JVM tries again), and the JVMs start all the same, only slower."""
    target = server.aot_cache(java) if java.aot else server.folder / ARCHIVE
    failed = target.with_name(target.name + ".failed")
    if target.is_file() or failed.is_file():
        return
    temp = target.with_name(f".{target.name}.{os.getpid()}")
    dump, use = ((f"-XX:AOTCacheOutput={temp}",), (f"-XX:AOTCache={temp}", "-XX:AOTMode=on")) if java.aot else \
        ((f"-XX:ArchiveClassesAtExit={temp}",), (f"-XX:SharedArchiveFile={temp}", "-Xshare:on"))
    base = [arg for arg in server.command(java.path, verify=True)
            if not arg.startswith("-XX:SharedArchiveFile=") and arg != "-Xshare:auto"]
    made = False
    try:
        with tempfile.TemporaryDirectory(prefix="eos-ks-archive-") as state, \
                contextlib.suppress(subprocess.SubprocessError, OSError):
            subprocess.run([base[0], *dump, *base[1:]], input=WARM_UP.replace("{state}", state), capture_output=True,
                           text=True, timeout=300, env=jvm_environment())
            if temp.is_file():
                mapped = subprocess.run([base[0], *use, *base[1:]], input='{"op": "exit"}\n', capture_output=True,
                                        text=True, timeout=300, env=jvm_environment())
                if mapped.returncode == 0:
                    os.replace(temp, target)
                    made = True
    finally:
        for leftover in (temp, temp.with_name(temp.name + ".config")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    if not made:
        with contextlib.suppress(OSError):
            failed.write_text(f"none could be made with {java.path} ({java.version or 'unknown version'})\n")
