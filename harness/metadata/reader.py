"""A metadata reader (KIP-868's broker side): it consumes the log, applies the records of a
transaction to a delta, and publishes a new image only at ``End`` (it drops the delta at
``Abort``); records outside a transaction are published after their (atomic) batch.

It also takes snapshots of its published (committed) image, written as record batches of an
arbitrary size, and can start from one instead of the beginning of the log. The mistakes of
:data:`MISTAKES` make it a mutant that some check must catch.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from eos_harness.metadata import LogSpec, MetadataLog
from eos_harness.models.metadata import ABORT, BEGIN, END, Entry, Image, image_from_snapshot, snapshot_batches
from eos_harness.process.child_events import run_reporting_child

__all__ = ["MISTAKES", "PUBLISHED_AT", "Reader", "load_snapshot", "reader_main"]

PUBLISHES_BATCHES = "reader-publishes-batches"  # publishes at every batch boundary, inside transactions too
SNAPSHOT_MID_TRANSACTION = "snapshot-mid-transaction"  # snapshots its image with the open transaction's delta
MISTAKES = (PUBLISHES_BATCHES, SNAPSHOT_MID_TRANSACTION)
# Where a reader publishes its image (the "at" of its "published" events): after loading a snapshot, at the
# end of a transaction (or a record outside one), at a batch boundary.
PUBLISHED_AT = ("snapshot", "end", "batch")


def load_snapshot(path: str | Path) -> tuple[int, Image]:
    """A snapshot file's position (the offset after its last entry) and image."""
    data = json.loads(Path(path).read_text())
    return data["position"], image_from_snapshot(data["batches"])


class Reader:
    """One reader of ``log``. ``emit`` receives ``published`` and ``snapshot`` events; snapshots go
    to ``snapshot_dir`` every ``snapshot_every`` batches (none when 0)."""

    def __init__(self, log: MetadataLog, name: str, emit=lambda event: None, mistake: str | None = None,
                 snapshot_dir: str | Path | None = None, snapshot_every: int = 0, seed: int = 0,
                 report_images: bool = True) -> None:
        if mistake is not None and mistake not in MISTAKES:
            raise ValueError(f"unknown reader mistake {mistake!r}: choose among {', '.join(MISTAKES)}")
        self.log, self.name, self.emit, self.mistake = log, name, emit, mistake
        self.snapshot_dir = Path(snapshot_dir) if snapshot_dir is not None else None
        self.snapshot_every, self.report_images = snapshot_every, report_images
        self.rng = random.Random(seed)
        self.image = Image()
        self.delta: list | None = None  # the open transaction's records; None outside a transaction
        self.position = 0  # the offset of the next entry to read
        self.published_position = 0
        self.batches = 0
        self.snapshots: list[Path] = []

    def start_from(self, snapshot: str | Path) -> None:
        self.position, self.image = load_snapshot(snapshot)
        self.published_position = self.position
        self._publish(self.position, "snapshot")

    def poll(self) -> int:
        """Read and apply what the log holds from the reader's position; returns the entries read."""
        entries = self.log.read(self.position)
        start = 0
        for i in range(1, len(entries) + 1):
            if i == len(entries) or entries[i].batch != entries[start].batch:
                self._batch(entries[start:i])
                start = i
        return len(entries)

    def _batch(self, batch: list[Entry]) -> None:
        outside = False
        for entry in batch:
            if entry.kind == BEGIN:
                if self.delta is None:
                    self.delta = []
            elif entry.kind == END:
                for record in self.delta or []:
                    self.image.apply(record)
                self.delta = None
                self._publish(entry.offset + 1, "end")
            elif entry.kind == ABORT:
                self.delta = None
            elif self.delta is not None:
                self.delta.append(entry.record)
            else:
                self.image.apply(entry.record)
                outside = True
        self.position = batch[-1].offset + 1
        if outside and self.delta is None:
            self._publish(self.position, "batch")
        elif self.mistake == PUBLISHES_BATCHES and self.delta:
            self._publish(self.position, "batch", self._with_delta())
        self.batches += 1
        if self.snapshot_every and self.snapshot_dir is not None and self.batches % self.snapshot_every == 0:
            self.take_snapshot()

    def _with_delta(self) -> Image:
        image = self.image.copy()
        for record in self.delta or []:
            image.apply(record)
        return image

    def _publish(self, position: int, at: str, image: Image | None = None) -> None:
        if image is None:
            self.published_position = position
        image = image or self.image
        self.emit({"type": "published", "reader": self.name, "position": position, "at": at,
                   "image": image.to_json() if self.report_images else None, "t": time.monotonic()})

    def take_snapshot(self) -> Path:
        """Write the published image (its committed state) as a snapshot, in batches of a random size."""
        if self.mistake == SNAPSHOT_MID_TRANSACTION:
            position, image = self.position, self._with_delta()
        else:
            position, image = self.published_position, self.image
        batch_records = self.rng.randint(1, 64)
        path = self.snapshot_dir / f"snapshot-{self.name}-{len(self.snapshots):04d}.json"
        path.write_text(json.dumps({"position": position, "batch_records": batch_records,
                                    "batches": snapshot_batches(image, batch_records)}))
        self.snapshots.append(path)
        self.emit({"type": "snapshot", "reader": self.name, "position": position, "file": str(path),
                   "batch_records": batch_records, "image": image.to_json()})
        return path

    def final(self) -> dict:
        return {"type": "final", "reader": self.name, "position": self.position, "image": self.image.to_json(),
                "open_transaction": self.delta is not None}


def reader_main(spec: LogSpec, name: str, mistake: str | None, snapshot_dir: str | None, snapshot_every: int,
                seed: int, report_images: bool, poll_interval: float, conn) -> None:
    """Entry point of a live reader process: poll the log until told ``stop``, then read to the end."""
    def read_until_stopped() -> None:
        with MetadataLog(spec) as log:
            reader = Reader(log, name, conn.send, mistake, snapshot_dir, snapshot_every, seed, report_images)
            conn.send({"type": "reading", "reader": name})
            while True:
                if not reader.poll() and conn.poll(poll_interval) and conn.recv() == "stop":
                    reader.poll()
                    conn.send(reader.final())
                    break

    run_reporting_child(conn, read_until_stopped)
