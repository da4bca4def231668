"""A user's own Java key-value store under ``verify``: the store reference ``jvm:CLASS@PATH``.

``CLASS`` is a class on ``PATH`` (a jar, or a folder of compiled classes) that is either a
``org.apache.kafka.streams.state.KeyValueBytesStoreSupplier`` (opened as Kafka's own suppliers are, through
``Stores.keyValueStoreBuilder`` with change logging on and caching off) or a ``StoreBuilder`` of a
``KeyValueStore<Bytes, byte[]>``; it has a public constructor taking the store's name, or none. It runs in a
JVM beside Kafka Streams 4.4.0's jars with ``enable.transactional.statestores=true`` (KIP-892): its
``readOnly(IsolationLevel.READ_COMMITTED)`` is its read-committed view, so it is checked as a transactional
store. A reference that is malformed, whose path does not exist or holds no such class, is a usage error
before anything runs.
"""

from __future__ import annotations

import re
import sys
import zipfile
from functools import lru_cache, partial
from pathlib import Path

from eos_harness.kafka_streams.lending import lending
from eos_harness.kafka_streams.store import KafkaStreamsStore
from eos_harness.stores import StoreFactoryError, StoreSpec

__all__ = ["PREFIX", "VERSION", "java_store_spec", "parse"]

PREFIX = "jvm:"
VERSION = "4.4.0"  # the Kafka Streams jars a user's store runs with
_CLASS = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*")
_USAGE = "a Java store is named jvm:CLASS@PATH (e.g. jvm:com.example.MyStoreSupplier@build/my-store.jar)"


def parse(spec: str) -> tuple[str, Path]:
    """The class name and the jar or folder of ``jvm:CLASS@PATH``; a StoreFactoryError saying what is wrong."""
    name, at, where = spec[len(PREFIX):].partition("@")
    if not at or not name or not where:
        raise StoreFactoryError(f"{spec!r}: {_USAGE}")
    if not _CLASS.fullmatch(name):
        raise StoreFactoryError(f"{spec!r}: {name!r} is not a Java class name; {_USAGE}")
    path = Path(where).expanduser().resolve()
    entry = name.replace(".", "/") + ".class"
    if path.is_dir():
        found = (path / entry).is_file()
    elif path.is_file():
        try:
            with zipfile.ZipFile(path) as jar:
                found = entry in jar.namelist()
        except (zipfile.BadZipFile, OSError) as exc:
            raise StoreFactoryError(f"{spec!r}: {where!r} is not a jar ({exc}); {_USAGE}") from None
    else:
        raise StoreFactoryError(f"{spec!r}: no jar or folder {where!r}; {_USAGE}")
    if not found:
        raise StoreFactoryError(f"{spec!r}: {where!r} holds no class {name} ({entry}); {_USAGE}")
    return name, path


@lru_cache(maxsize=64)
def java_store_spec(spec: str) -> StoreSpec:
    """The store ``jvm:CLASS@PATH`` names (checked once per process: :func:`parse`)."""
    name, path = parse(spec)
    return StoreSpec(spec, "store", f"your Java store {name} from {path}, in Kafka Streams {VERSION}'s JVM",
                     partial(KafkaStreamsStore, VERSION, "user", True, supplier=name, classpath=str(path)),
                     lending=lending(VERSION, verify=True))


def main(argv: list[str]) -> int:
    """``python -m eos_harness.kafka_streams.user --classpath``: the jars to compile a Java store against
    (Kafka Streams 4.4.0's, fetched and checked on first use), as a classpath."""
    import os

    from eos_harness import jars
    from eos_harness.kafka_streams.bundles import streams_bundle

    if argv != ["--classpath"]:
        print("usage: python -m eos_harness.kafka_streams.user --classpath", file=sys.stderr)
        return 2
    try:
        print(os.pathsep.join(str(p) for p in jars.ensure(streams_bundle(VERSION), quiet=True)))
    except jars.JarFetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
