"""Registers every built-in store and mutant under its public name."""

from __future__ import annotations

from harness.stores import StoreSpec, register
from harness.stores.memory import MemoryStore

register(StoreSpec("memory", "store", "in-memory, not persistent (restored from the changelog)", MemoryStore))
