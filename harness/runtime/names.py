"""Names on disk (Kafka Streams' state directory layout): each store lives in
``[state.dir]/[application.id]/[task.id]/rocksdb/[store.name]``, writes nothing outside that directory,
and logs to ``[application.id]-[store.name]-changelog``.

The runtime owns the rest of the task directory: its ``.checkpoint`` (and the temp file it is
written through), ``.lock``, and the ``rocksdb`` folder that holds the stores' directories. Any other
file in a task directory, or any file in ``rocksdb`` outside every store's own directory, was written
by a store outside its directory (:func:`outside_writes`; the lifecycle's ``store_directory`` check).
A store that downgrades (KIP-892's ``upgrade.from``) writes the task's ``.checkpoint`` itself: that
name is the runtime's, so it is not reported.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from eos_harness.store import StoreContext

__all__ = ["RUNTIME_FILES", "expected_store_dir", "naming_problems", "outside_writes"]

RUNTIME_FILES = frozenset({".checkpoint", ".checkpoint.tmp", ".lock"})


def expected_store_dir(state_dir: Path, application_id: str, task_id: str, store_name: str) -> Path:
    return Path(state_dir) / application_id / task_id / "rocksdb" / store_name


def naming_problems(context: StoreContext, state_dir: Path) -> list[str]:
    """What in ``context`` breaks the naming rule, in words (empty when the names are right)."""
    problems = []
    expected = expected_store_dir(state_dir, context.application_id, context.task_id, context.store_name)
    if Path(context.directory).resolve() != expected.resolve():
        problems.append(f"store {context.store_name!r} lives in {context.directory}, not in {expected} "
                        "([state.dir]/[application.id]/[task.id]/rocksdb/[store.name])")
    changelog = f"{context.application_id}-{context.store_name}-changelog"
    for tp in (context.changelog, *getattr(context, "changelogs", ())):
        if tp.topic != changelog:
            problems.append(f"store {context.store_name!r} logs to {tp.topic!r}, not to {changelog!r} "
                            "([application.id]-[store.name]-changelog)")
    return sorted(set(problems))


def outside_writes(task_dir: Path, store_dirs: Iterable[Path]) -> list[str]:
    """Every file in ``task_dir`` that no store's directory holds and the runtime did not write, sorted."""
    task_dir = Path(task_dir)
    if not task_dir.is_dir():
        return []
    owned = [Path(d).resolve() for d in store_dirs]
    found = []
    for path in task_dir.rglob("*"):
        if path.is_dir():
            continue
        resolved = path.resolve()
        if any(resolved.is_relative_to(d) for d in owned):
            continue
        if path.parent == task_dir and path.name in RUNTIME_FILES:
            continue
        found.append(str(path))
    return sorted(found)
