"""One scenario run on an engine's executor (a Spark task), in processes of its own that end with it.

:func:`run_task` (what the Spark task calls, in a Python worker) makes the scenario's own directory under
the executor's temp directory and starts the scenario's host (``python -m eos_harness.engine_host``) in a
session of its own. The host makes itself the subreaper of everything under it (``PR_SET_CHILD_SUBREAPER``:
a process the scenario started and orphaned is reparented to it, not to init) and forks the scenario's
process, which runs the suite's ``run_one`` exactly as the local pool does (its own temp root, its store
children, its JVMs). The host holds the read end of a pipe whose write end only the task holds: when the task
ends whatever ended it (a result, a task killed by Spark, a speculative copy cancelled, the Python worker or
the executor's JVM SIGKILLed), the pipe closes, and the host SIGKILLs every process under it, removes the
scenario's directory and exits. A scenario that ended on its own leaves nothing either: what it left running
is killed the same way.

The task hands back the result (JSON, as ``results.jsonl`` holds it) or the exception ``run_one`` raised, the
files of the scenario's directory (a tar) and what its processes wrote, for the driver to keep in the run
directory (:mod:`eos_harness.spark.engine`). Nothing here imports Spark.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import pickle
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["TRAVELS", "HostedScenario", "TaskOutcome", "main", "run_task"]

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
TRAVELS = ("EOS_KAFKA_VERSION", "KAFKA_HOME")  # the Kafka release a result records (a broker the driver started)
TASK_FILE, RESULT_FILE, RAISED_FILE, OUTPUT_FILE = "task.pickle", "result.json", "raised.pickle", "output.log"


@dataclass(frozen=True)
class HostedScenario:
    """What a task needs to run one scenario of a campaign: the suite, the plan index and the scenario, and
    what the driver's process knows that the executor's must too (``sys_path``: where a user's store module
    is found; ``declared_for_run``: crash points a probe found reached but undeclared; ``children_log``:
    the suite's log of its processes' output, or None; ``environ``: the driver's environment variables that decide
    what a scenario runs, :data:`TRAVELS`)."""

    suite: str
    index: int
    scenario: Any
    sys_path: tuple[str, ...] = ()
    declared_for_run: tuple[str, ...] = ()
    children_log: str | None = None
    environ: tuple[tuple[str, str], ...] = ()  # the driver's settings of the scenario (which Kafka release runs)


@dataclass
class TaskOutcome:
    """What a task hands back: the result's JSON text, or the pickled exception ``run_one`` raised, or
    neither (``died``: why the scenario's process ended without either); the scenario's directory as it
    was there (``directory``: its path on the executor; ``files``: a tar of it); what its processes wrote."""

    index: int
    directory: str
    result: str | None = None
    raised: bytes | None = None
    died: str | None = None
    files: bytes = b""
    output: bytes = b""
    executor: dict = field(default_factory=dict)
    attempt: int = 0  # the engine's attempt of the task (0: its first)


def run_task(payload: bytes) -> TaskOutcome:
    """Run the pickled :class:`HostedScenario` in its own host process and directory (see the module);
    returns its outcome. Whatever ends this call, the host ends what it started (its lifeline closes)."""
    hosted: HostedScenario = pickle.loads(payload)
    work = Path(tempfile.mkdtemp(prefix=f"eos-task-{hosted.index:05d}-"))
    directory = work / f"scenario-{hosted.index:05d}"
    lifeline_read, lifeline_write = os.pipe()
    try:
        (work / TASK_FILE).write_bytes(payload)
        with open(work / OUTPUT_FILE, "ab") as output:
            host = subprocess.Popen([sys.executable, "-m", "eos_harness.engine_host", str(work), str(lifeline_read)],
                                    pass_fds=(lifeline_read,), stdin=subprocess.DEVNULL, stdout=output,
                                    stderr=subprocess.STDOUT, start_new_session=True, cwd=work)
        os.close(lifeline_read)
        lifeline_read = -1
        code = host.wait()
        outcome = TaskOutcome(hosted.index, str(directory), executor={"host": os.uname().nodename,
                                                                      "pid": os.getpid()})
        if (work / RESULT_FILE).exists():
            outcome.result = (work / RESULT_FILE).read_text()
        elif (work / RAISED_FILE).exists():
            outcome.raised = (work / RAISED_FILE).read_bytes()
        else:
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            outcome.died = f"the scenario's process on the executor ended ({how}) before its result"
        outcome.files = _tar(directory)
        with contextlib.suppress(OSError):
            outcome.output = (work / OUTPUT_FILE).read_bytes()
        return outcome
    finally:
        if lifeline_read >= 0:
            os.close(lifeline_read)
        os.close(lifeline_write)  # the host kills whatever is still running under it
        shutil.rmtree(work, ignore_errors=True)


def _tar(directory: Path) -> bytes:
    if not directory.is_dir():
        return b""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        tar.add(directory, arcname=".")
    return buffer.getvalue()


# -- the host (python -m eos_harness.engine_host WORK LIFELINE_FD) ------------------------------------------

def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _kill_everything_under_me() -> None:
    """SIGKILL every process under this one (the subreaper's: orphans included), and reap them."""
    import psutil

    for _ in range(3):  # a process forking while it is listed is caught by the next round
        try:
            under = psutil.Process().children(recursive=True)
        except psutil.Error:
            under = []
        if not under:
            break
        for process in under:
            with contextlib.suppress(psutil.Error):
                process.kill()
        psutil.wait_procs(under, timeout=3)
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def main(argv: list[str]) -> int:
    work, lifeline = Path(argv[0]), int(argv[1])
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    pid = os.fork()
    if pid == 0:
        os.close(lifeline)
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        code = 1
        try:
            _run_scenario(work)
            code = 0
        except BaseException:  # noqa: BLE001 - the host's log says why; the driver reports it
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    status = None
    while status is None:
        ready, _, _ = select.select([lifeline], [], [], 0.2)
        if ready and not os.read(lifeline, 1):  # the task is gone: end the scenario now
            _kill_everything_under_me()
            shutil.rmtree(work, ignore_errors=True)
            return 1
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = raw
    _kill_everything_under_me()  # whatever the scenario left running
    return os.waitstatus_to_exitcode(status) if os.waitstatus_to_exitcode(status) >= 0 else 1


def _run_scenario(work: Path) -> None:
    """In the scenario's process: the suite's ``run_one``, as the local pool runs it, in its own session."""
    hosted: HostedScenario = pickle.loads((work / TASK_FILE).read_bytes())
    sys.path[:0] = [p for p in hosted.sys_path if p not in sys.path]
    os.environ.update(dict(hosted.environ))
    from eos_harness.faults import points
    from eos_harness.session import session
    from eos_harness.suite import suite

    entry = suite(hosted.suite)
    with session():
        for name in hosted.declared_for_run:
            points.declare_for_run(name)
        directory = work / f"scenario-{hosted.index:05d}"
        with contextlib.ExitStack() as stack:
            if hosted.children_log:
                from eos_harness.process.server import children_output

                stack.enter_context(children_output(work / OUTPUT_FILE))
            try:
                result = entry.run_one(hosted.scenario, directory)
            except Exception as exc:  # handed to the driver, which decides (an error result, or fatal)
                try:
                    raised = pickle.dumps(exc)
                    pickle.loads(raised)
                except Exception:  # noqa: BLE001 - an exception that does not travel: its text does
                    raised = pickle.dumps(RuntimeError(f"{type(exc).__name__}: {exc}"))
                _write(work / RAISED_FILE, raised)
                return
        _write(work / RESULT_FILE, json.dumps(result).encode())


def _write(path: Path, data: bytes) -> None:
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.rename(path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
