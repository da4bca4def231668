"""The optional extras of eos-harness and a check, run before anything starts, that names a missing
one with the command that installs it (rather than a ``ModuleNotFoundError`` after Java started).

``pip install 'eos-harness[kafka]'`` (confluent-kafka: any ``--broker`` other than ``embedded``,
``kafka-log``), ``[spark]`` (PySpark and the file watcher: ``--suite spark``), ``[docker]``
(testcontainers), ``[all]`` (all three).
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "MissingExtra", "needs_kafka", "require"]

# extra -> the modules it installs that the harness imports
EXTRAS: dict[str, tuple[str, ...]] = {
    "kafka": ("confluent_kafka",),
    "spark": ("pyspark", "inotify_simple", "pandas", "pyarrow"),
    "docker": ("testcontainers",),
}


class MissingExtra(RuntimeError):
    """An optional extra a command needs is not installed; the message gives the pip command."""


def require(extra: str, needed_by: str) -> None:
    """Raise :class:`MissingExtra` unless every module of ``extra`` is installed. ``needed_by`` names
    what needs it (``--broker kafka-local``), for the message. Found, not imported: a command that ends
    before it needs them (a usage error) or that never imports them itself (the Spark suite's command,
    whose drivers import PySpark, pandas and pyarrow) does not pay for their import (about 0.6 CPU-s)."""
    for module in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                raise ModuleNotFoundError(f"No module named {module!r}", name=module)
        except ImportError as exc:
            raise MissingExtra(
                f"{needed_by} needs the {extra} extra ({module} cannot be imported: {exc}); "
                f"install it with: pip install 'eos-harness[{extra}]'"
            ) from None


def needs_kafka(broker: object) -> bool:
    """Whether a ``--broker`` value (its text, or a parsed spec whose ``str`` is its text) is Kafka."""
    return str(broker).startswith(("kafka-local", "kafka-quorum", "kafka://"))
