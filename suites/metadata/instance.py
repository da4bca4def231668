"""The metadata suite's processes: a controller instance with its fault armed, and the live reader.

Each runs in a child forked by the zygote; the driver collects their events into the history. A
controller's fault is a kind of :mod:`eos_harness.faults.kinds` (a crash point, ``freeze:POINT``
for a zombie controller, ``kill@n``); the kind's hooks act through this instance's methods.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

from eos_harness.history import History
from eos_harness.metadata import LogSpec
from eos_harness.metadata.controller import controller_main
from eos_harness.metadata.reader import reader_main
from eos_harness.process.faulted import FaultedChild
from eos_harness.process.server import forkserver_context
from eos_harness.suites.lifecycle.schedule import Fault

EVENT_TIMEOUT_S = 60.0


class ControllerInstance(FaultedChild):
    """One controller process of epoch ``number``; ``collect()`` records its events until it ends:
    done, fenced, error, hang, crash, or frozen."""

    def __init__(self, spec: LogSpec, commands: list[dict], max_batch_bytes: int, mistake: str | None,
                 fault: Fault | None, number: int, history: History, report_state: bool = True) -> None:
        super().__init__(fault, number, history)
        ctx = forkserver_context()
        self.parent, child = ctx.Pipe(duplex=False)
        armed = self.kind.armed_in_child(fault) if self.kind is not None else None
        self.proc = ctx.Process(target=controller_main, daemon=True,
                                args=(spec, number, commands, max_batch_bytes, mistake, armed, report_state, child,
                                      self.hold))
        self.proc.start()
        child.close()
        history.add(number, {"type": "start", "epoch": number, "fault": str(fault) if fault else None,
                             "pid": self.proc.pid})

    def _wait_for_event(self) -> bool:
        if self.parent.poll(EVENT_TIMEOUT_S):
            return True
        self.proc.kill()
        self.history.add(self.number, {"type": "hang", "seconds": EVENT_TIMEOUT_S})
        return False

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)
        self.history.add(self.number, {"type": "resumed"})
        self.fault, self.kind = None, None


class LiveReader:
    """The reader process that follows the log while the controllers write it; its events go to the
    history from a thread of the driver."""

    def __init__(self, spec: LogSpec, history: History, mistake: str | None, snapshot_dir: str | None,
                 snapshot_every: int, seed: int, report_images: bool = True, poll_interval: float = 0.005,
                 name: str = "live") -> None:
        ctx = forkserver_context()
        self.history, self.name = history, name
        self.parent, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=reader_main, daemon=True,
                                args=(spec, name, mistake, snapshot_dir, snapshot_every, seed, report_images,
                                      poll_interval, child))
        self.proc.start()
        child.close()
        self.ended: str | None = None
        self.events: list[dict] = []
        self.ready = threading.Event()
        self._thread = threading.Thread(target=self._collect, name=f"reader-{name}", daemon=True)
        self._thread.start()
        if not self.ready.wait(EVENT_TIMEOUT_S):
            self.proc.kill()
            raise RuntimeError(f"the {name} reader process did not start within {EVENT_TIMEOUT_S:.0f} s")

    def _collect(self) -> None:
        while True:
            try:
                event = self.parent.recv()
            except (EOFError, OSError):
                self.ended = self.ended or "died"
                self.ready.set()
                return
            if event["type"] == "reading":
                self.ready.set()
                continue
            self.events.append(self.history.add(0, event))
            if event["type"] in ("final", "error"):
                self.ended = event["type"]
                self.ready.set()
                return

    def stop(self, timeout: float = EVENT_TIMEOUT_S) -> str:
        """Tell the reader to read to the end of the log and report its image; returns how it ended."""
        if self.ended is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.parent.send("stop")
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.proc.kill()
            self.history.add(0, {"type": "hang", "reader": self.name, "seconds": timeout})
            self._thread.join(5)
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.parent.close()
        return self.ended or "hang"
