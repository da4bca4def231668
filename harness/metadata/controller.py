"""The metadata controller (KIP-868): commands become records, written as atomic batches and, when
they do not fit one batch, as a metadata transaction ``Begin … End`` across batches.

Records are applied to the controller's in-memory state as they are written (optimistically, as
KRaft's timeline structures do). On activation a controller fences every older one, replays the
log, and if it finds a partial transaction at the end (its predecessor died mid-transaction) it
appends ``Abort`` and resets its state to what it was before that transaction's ``Begin``. It
then runs the commands not yet in the log (a command is in the log once its records are committed:
its atomic batch, or its transaction's ``End``).

The crash points (``eos-harness points``) are the KIP's failover windows. The deliberate mistakes
of :data:`MISTAKES` make this a mutant that some check must catch.
"""

from __future__ import annotations

import time
from dataclasses import replace

from eos_harness.broker import ProducerFenced
from eos_harness.faults import points
from eos_harness.faults.points import crash_point, declare
from eos_harness.metadata import LogSpec, MetadataLog, pack
from eos_harness.models.metadata import ABORT, BEGIN, END, RECORD, Command, Entry, Image, records_of
from eos_harness.process.child_events import held_after, report_fault_firings, run_reporting_child

__all__ = ["MISTAKES", "P_ABORT_AFTER", "P_ABORT_BEFORE", "P_AFTER_BEGIN", "P_AFTER_END", "P_BEFORE_END",
           "P_BETWEEN_BATCHES", "POINTS", "Controller", "controller_main"]

P_AFTER_BEGIN = declare("metadata.controller.after_begin",
                        "a metadata transaction's first batch (with its Begin) is in the log, the rest is not")
P_BETWEEN_BATCHES = declare("metadata.controller.between_batches",
                            "a batch of a metadata transaction is in the log, the next batch is not")
P_BEFORE_END = declare("metadata.controller.before_end",
                       "a metadata transaction's last batch (with its End) is about to be appended")
P_AFTER_END = declare("metadata.controller.after_end",
                      "a metadata transaction's End is in the log, the command not yet acknowledged")
P_ABORT_BEFORE = declare("metadata.controller.abort.before_append",
                         "a new controller found a partial transaction and is about to append its Abort")
P_ABORT_AFTER = declare("metadata.controller.abort.after_append",
                        "a new controller appended Abort for a partial transaction; its state is not reset yet")
POINTS = (P_AFTER_BEGIN, P_BETWEEN_BATCHES, P_BEFORE_END, P_AFTER_END, P_ABORT_BEFORE, P_ABORT_AFTER)

# The controller's deliberate mistakes (mutants), each a real one a controller could make.
SKIPS_ABORT = "controller-skips-abort"  # a new controller does not abort the partial transaction it finds
ABORT_KEEPS_STATE = "abort-keeps-state"  # it appends Abort but keeps the partial transaction's records applied
INTERLEAVES = "interleaved-transactions"  # it writes two multi-batch commands' transactions interleaved
MISTAKES = (SKIPS_ABORT, ABORT_KEEPS_STATE, INTERLEAVES)

_BATCH_ID_PLACEHOLDER = "0" * 10  # batch ids are 10 characters: packing counts them before they are set


class Controller:
    """One controller instance of epoch ``epoch`` on ``log``; ``emit`` receives its events."""

    def __init__(self, log: MetadataLog, epoch: int, max_batch_bytes: int, mistake: str | None = None,
                 emit=lambda event: None, report_state: bool = True, always_transaction: bool = False) -> None:
        if mistake is not None and mistake not in MISTAKES:
            raise ValueError(f"unknown controller mistake {mistake!r}: choose among {', '.join(MISTAKES)}")
        self.log, self.epoch, self.max_batch_bytes = log, epoch, max_batch_bytes
        self.mistake, self.emit, self.report_state = mistake, emit, report_state
        self.always_transaction = always_transaction  # wrap a command that fits one batch in Begin … End too
        self.state = Image()
        self.done: set[int] = set()
        self._batches = 0

    def _state_json(self) -> dict | None:
        return self.state.to_json() if self.report_state else None

    # -- activation ---------------------------------------------------------------------------
    def activate(self) -> None:
        """Fence the older controllers, replay the log, abort a partial transaction left at its end."""
        self.log.become_writer()
        entries = self.log.read(0)
        state, before, open_begin = Image(), None, None
        for entry in entries:
            if entry.kind == BEGIN:
                before, open_begin = state.copy(), entry
            elif entry.kind == RECORD:
                state.apply(entry.record)
                if entry.txn is None:
                    self.done.add(entry.command)
            elif entry.kind == END:
                before, open_begin = None, None
                self.done.add(entry.command)
            elif entry.kind == ABORT:
                if before is not None:
                    state = before
                before, open_begin = None, None
        position = entries[-1].offset + 1 if entries else 0
        aborted = None
        if open_begin is not None and self.mistake != SKIPS_ABORT:
            crash_point(P_ABORT_BEFORE)
            abort = Entry(ABORT, None, open_begin.txn, open_begin.command, self.epoch, self._batch_id())
            position = self.log.append([abort])
            crash_point(P_ABORT_AFTER)
            if self.mistake != ABORT_KEEPS_STATE:
                state = before
            aborted = open_begin.txn
        self.state = state
        self.emit({"type": "activated", "epoch": self.epoch, "position": position, "log_entries": len(entries),
                   "found_open": open_begin.txn if open_begin is not None else None, "aborted": aborted,
                   "state": self._state_json()})

    # -- commands -----------------------------------------------------------------------------
    def run(self, commands: list[Command]) -> None:
        """Run every command not yet in the log, in order."""
        pending = [i for i in range(len(commands)) if i not in self.done]
        while pending:
            index = pending.pop(0)
            records = records_of(commands[index], self.state)
            if not records:
                self.emit({"type": "refused", "command": index, "what": str(commands[index])})
                continue
            batches = self._batches_of(index, records)
            if self.mistake == INTERLEAVES and len(batches) > 1 and pending:
                other = pending[0]
                other_records = records_of(commands[other], self.state)
                other_batches = self._batches_of(other, other_records) if other_records else []
                if len(other_batches) > 1:
                    pending.pop(0)
                    self._write_interleaved([(index, batches), (other, other_batches)])
                    continue
            self._write(index, batches)

    def execute(self, index: int, command: Command) -> bool:
        """Write one command (number ``index``) now; False if it was refused (no records)."""
        records = records_of(command, self.state)
        if not records:
            self.emit({"type": "refused", "command": index, "what": str(command)})
            return False
        self._write(index, self._batches_of(index, records))
        return True

    def _batches_of(self, index: int, records: list) -> list[list[Entry]]:
        plain = [Entry(RECORD, tuple(r), None, index, self.epoch, _BATCH_ID_PLACEHOLDER) for r in records]
        batches = pack(plain, self.max_batch_bytes)
        if len(batches) == 1 and not self.always_transaction:
            return batches  # one atomic batch: no transaction needed
        txn = f"{self.epoch}.{index}"
        entries = ([Entry(BEGIN, None, txn, index, self.epoch, _BATCH_ID_PLACEHOLDER)]
                   + [replace(e, txn=txn) for e in plain]
                   + [Entry(END, None, txn, index, self.epoch, _BATCH_ID_PLACEHOLDER)])
        return pack(entries, self.max_batch_bytes)

    def _batch_id(self) -> str:
        self._batches += 1
        return f"{self.epoch:04d}{self._batches:06d}"

    def _append(self, batch: list[Entry]) -> int:
        batch_id = self._batch_id()
        position = self.log.append([replace(e, batch=batch_id) for e in batch])
        for entry in batch:
            if entry.kind == RECORD:
                self.state.apply(entry.record)  # optimistic: applied as written
        return position

    def _write(self, index: int, batches: list[list[Entry]]) -> None:
        transactional = batches[0][0].kind == BEGIN
        for n, batch in enumerate(batches):
            last = n == len(batches) - 1
            if transactional and last:
                crash_point(P_BEFORE_END)
            position = self._append(batch)
            if transactional and n == 0 and not last:
                crash_point(P_AFTER_BEGIN)
            if transactional and not last:
                crash_point(P_BETWEEN_BATCHES)
        if transactional:
            crash_point(P_AFTER_END)
        self.emit({"type": "committed", "command": index, "batches": len(batches), "transaction": transactional,
                   "records": sum(len(b) for b in batches), "position": position, "t": time.monotonic()})

    def _write_interleaved(self, writes: list[tuple[int, list[list[Entry]]]]) -> None:
        """The INTERLEAVES mistake: the batches of two transactions, taken in turn."""
        rounds = max(len(b) for _, b in writes)
        position = 0
        for n in range(rounds):
            for _, batches in writes:
                if n < len(batches):
                    position = self._append(batches[n])
        for index, batches in writes:
            self.emit({"type": "committed", "command": index, "batches": len(batches), "transaction": True,
                       "records": sum(len(b) for b in batches), "position": position, "t": time.monotonic()})


def controller_main(spec: LogSpec, epoch: int, commands: list[dict], max_batch_bytes: int, mistake: str | None,
                    armed: tuple[str, int, str] | None, report_state: bool, conn, hold: int | None = None) -> None:
    """Entry point of a controller process (forked by the zygote); ``armed``: (point, hit, action); ``hold``:
    wait after this many events for the driver's kill (``kill@n``: :func:`~eos_harness.process.child_events.held_after`),
    so that it lands after the n-th event however loaded the machine is, while commands are still to write."""
    emit = held_after(conn.send, hold)

    def run_controller() -> None:
        report_fault_firings(conn)
        if armed is not None:
            points.load_declarations()
            points.arm(*armed)
        with MetadataLog(spec) as log:
            controller = Controller(log, epoch, max_batch_bytes, mistake, emit, report_state)
            try:
                controller.activate()
                controller.run([Command.from_json(c) for c in commands])
            except ProducerFenced as exc:
                emit({"type": "fenced", "epoch": epoch, "error": str(exc)})
            else:
                emit({"type": "done", "epoch": epoch, "state": controller._state_json()})

    run_reporting_child(conn, run_controller)
