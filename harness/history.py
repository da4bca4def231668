"""The history of a run: every event, numbered, written by the driver (never by the process under test)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class History:
    path: Path
    events: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._file = self.path.open("w")
        self._lock = threading.Lock()  # a broker fault records its event from its own thread

    def add(self, instance: int, event: dict) -> dict:
        with self._lock:
            event = {"seq": len(self.events), "instance": instance, **event}
            self.events.append(event)
            self._file.write(json.dumps(event) + "\n")
        return event

    def close(self) -> None:
        self._file.close()
