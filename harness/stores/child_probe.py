"""What a store is, learned once at the edge without running a user's code in the harness's process.

:func:`store_ref` turns a store spec (a built-in name or a user's ``module:function``) into a
:class:`~eos_harness.stores.StoreRef`: a key-value or a window store, what it declares it offers, the
window semantics it declares, the crash points its module declares, or the ``store_*`` finding of a
store that broke the protocol while asked. A user's module is imported, and its factory called once,
in a child forked by the zygote (:mod:`eos_harness.process.zygote`), every step bounded by the store
timeout. A module that cannot be loaded (a syntax error, named with its file and line; an import that
raises, exits, is killed or does not finish in time) or a factory that returns no store is a
:class:`~eos_harness.stores.StoreFactoryError`, a usage error.

Whatever the store's code does there (``SystemExit``, ``KeyboardInterrupt``, ``os._exit``, a signal
to itself, a thread that never ends, a sleep) stays in the child: the child leads its own process
group and is killed, group and all, when the probe ends. Built-in stores are the harness's own code
and are described without a child.
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
import threading
import traceback

from eos_harness.process.guard import STORE_TIMEOUT_S
from eos_harness.stores import KEY_VALUE, WINDOW, StoreFactoryError, StoreRef

__all__ = ["ChildFailed", "ended", "import_failure", "run_in_child", "store_ref"]

_cache: dict[tuple[str, tuple[str, ...]], StoreRef | StoreFactoryError] = {}


def store_ref(spec: str | StoreRef, timeout: float = STORE_TIMEOUT_S) -> StoreRef:
    """The :class:`StoreRef` of ``spec`` (a ref is returned as it is). Raises
    :class:`StoreFactoryError` when it names no usable store (a usage error: the message says what is
    wrong and where). A user's code runs in a child, each step (import, factory, ``window_config``,
    ``capabilities``) bounded by ``timeout`` seconds; the answer is kept for the rest of the command
    (one probe per store and command)."""
    if isinstance(spec, StoreRef):
        return spec
    from eos_harness.stores.registry import builtin_spec, resolve

    builtin = builtin_spec(spec)
    if builtin is None and ":" not in spec:
        resolve(spec)  # the usage error for an unknown name
    if builtin is not None:
        return _builtin_ref(spec)
    key = (spec, tuple(sys.path))
    if key not in _cache:
        _cache[key] = _inspect_in_child(spec, timeout)
    answer = _cache[key]
    if isinstance(answer, StoreFactoryError):
        raise StoreFactoryError(str(answer))
    from eos_harness.faults import points

    for name, meaning in answer.points:  # as the module's own import would have, here too
        with contextlib.suppress(ValueError):
            points.declare(name, meaning)
    return answer


def _builtin_ref(spec: str) -> StoreRef:
    from eos_harness.store import Capabilities
    from eos_harness.stores.registry import builtin_spec

    builtin = builtin_spec(spec)
    key = (spec, ())
    if key not in _cache:
        store = builtin.factory()
        capabilities = store.capabilities() if callable(getattr(store, "capabilities", None)) else None
        if builtin.window:
            _cache[key] = StoreRef(spec, WINDOW, builtin, capabilities, store.window_config().semantics)
        else:
            _cache[key] = StoreRef(spec, KEY_VALUE, builtin, capabilities or Capabilities())
    return _cache[key]  # type: ignore[return-value]


# -- the driver's side ---------------------------------------------------------------------------------


def _inspect_in_child(spec: str, timeout: float) -> StoreRef | StoreFactoryError:
    """The probe's answer: the StoreRef, or the StoreFactoryError to raise."""
    from eos_harness.process.guard import stack_and_kill
    from eos_harness.process.server import forkserver_context
    from eos_harness.verdict import hang_finding

    module = spec.partition(":")[0]
    ctx = forkserver_context()
    parent, child = ctx.Pipe()
    stacks, stack_writer = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_probe_child, args=(spec, list(sys.path), child, stack_writer), daemon=True)
    process.start()
    child.close()
    stack_writer.close()
    step = "import"
    try:
        while True:
            if not parent.poll(timeout):
                stack = stack_and_kill(process, stacks)
                if step == "import":
                    return StoreFactoryError(
                        f"store factory {spec!r}: importing module {module!r} did not finish within {timeout:g} s "
                        f"(--store-timeout); it was stopped. Where it was:\n{_last_frames(stack)}")
                return StoreRef(spec, finding=hang_finding(step, timeout, stack))
            try:
                message = parent.recv()
            except EOFError:
                process.join(10)
                died = ended(process.exitcode)
                if step == "import":
                    return StoreFactoryError(f"store factory {spec!r}: importing module {module!r} ended the "
                                             f"process ({died}); a store module must not exit when imported")
                return StoreRef(spec, finding={"check": "store_error", "operation": step,
                                               "expected": f"{step} returns (the store's process goes on)",
                                               "observed": f"the store's process {died} during {step}",
                                               "detail": None})
            if message[0] == "step":
                step = message[1]
            elif message[0] == "usage":
                return StoreFactoryError(message[1])
            elif message[0] == "finding":
                return StoreRef(spec, finding=message[1])
            else:
                return StoreRef(spec, **message[1])
    finally:
        process.kill()  # the probe's child, and (its own process group) whatever it started
        process.join()
        parent.close()
        stacks.close()


def ended(exitcode: int | None) -> str:
    """How a process ended, in words: ``exited with code 0``, ``was killed by SIGTERM``."""
    if exitcode is None:
        return "ended (its exit code is unknown)"
    if exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-exitcode).name}"
        return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def _last_frames(stack: str) -> str:
    """The frames of a stack dump (innermost first) down to the import machinery: the module's own."""
    own = []
    for line in stack.splitlines():
        if "importlib" in line:
            break
        own.append(line)
    return "\n".join(own) or "(it wrote no stack)"


class ChildFailed(Exception):
    """What :func:`run_in_child` ran broke the protocol: ``finding`` is a ``store_*`` finding (it raised,
    its process died, or it did not finish within the store timeout)."""

    def __init__(self, finding: dict) -> None:
        super().__init__(f"{finding['check']}: {finding['observed']}")
        self.finding = finding


def run_in_child(target, args: tuple, timeout: float = STORE_TIMEOUT_S, operation: str = "probe"):
    """``target(*args)`` (a module-level function that runs a user's store) in a child forked by the
    zygote, the whole of it bounded by ``timeout`` seconds; returns what it returned (pickled). Raises
    :class:`ChildFailed` with a ``store_raised``, ``store_error`` or ``store_hang`` finding for
    ``operation`` when it raised, its process died, or it hung (its stack in the finding), and
    :class:`StoreFactoryError` when it raised one (a usage error). The child, and whatever it started
    (its process group), is killed when this returns."""
    from eos_harness.process.guard import stack_and_kill
    from eos_harness.process.server import forkserver_context
    from eos_harness.verdict import hang_finding

    ctx = forkserver_context()
    parent, child = ctx.Pipe()
    stacks, stack_writer = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_run_child, args=(target, args, operation, list(sys.path), child, stack_writer),
                          daemon=True)
    process.start()
    child.close()
    stack_writer.close()
    try:
        if not parent.poll(timeout):
            raise ChildFailed(hang_finding(operation, timeout, stack_and_kill(process, stacks)))
        try:
            kind, value = parent.recv()
        except EOFError:
            process.join(10)
            raise ChildFailed({"check": "store_error", "operation": operation,
                               "expected": f"{operation} returns (the store's process goes on)",
                               "observed": f"the store's process {ended(process.exitcode)} during {operation}",
                               "detail": None}) from None
        if kind == "usage":
            raise StoreFactoryError(value)
        if kind == "finding":
            raise ChildFailed(value)
        return value
    finally:
        process.kill()
        process.join()
        parent.close()
        stacks.close()


def _run_child(target, args: tuple, operation: str, sys_path: list[str], conn, stacks) -> None:
    from eos_harness.process.guard import StoreFinding, StoreRaised, install_stack_dump

    install_stack_dump(stacks)
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    try:
        result = target(*args)
    except StoreFactoryError as exc:
        conn.send(("usage", str(exc)))
    except StoreFinding as exc:
        conn.send(("finding", exc.to_json()))
    except BaseException as exc:  # noqa: BLE001 - whatever the store's code raised is the finding
        conn.send(("finding", StoreRaised(operation, exc).to_json()))
    else:
        conn.send(("ok", result))


# -- the child -----------------------------------------------------------------------------------------


def _probe_child(spec: str, sys_path: list[str], conn, stacks) -> None:
    """In the probe's child: import the module, call the factory, ask the store what it is; send each
    step's name before it runs, then the facts, a finding or a usage error."""
    from eos_harness.faults import points
    from eos_harness.process.guard import _INVOKERS, GuardedStore, StoreFinding, install_stack_dump
    from eos_harness.stores import check_store

    install_stack_dump(stacks)
    sys.path[:0] = [p for p in sys_path if p not in sys.path]
    ours = {p.name for p in points.load_declarations()}
    module_name, _, attribute = spec.partition(":")
    conn.send(("step", "import"))
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:  # noqa: BLE001 - whatever the import does is the user's to fix
        conn.send(("usage", import_failure(spec, module_name, exc)))
        return
    declared = tuple((p.name, p.description) for p in points.declared() if p.name not in ours)
    threads = sum(1 for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive())
    factory = getattr(module, attribute, None)
    if factory is None:
        conn.send(("usage", f"store factory {spec!r} not found: module {module_name!r} has no attribute {attribute!r}"))
        return
    if not callable(factory):
        conn.send(("usage", f"store factory {spec!r} is not callable; point at a function returning a store"))
        return
    try:
        conn.send(("step", "factory"))
        store = _INVOKERS["factory"]("factory", factory, ())
        if callable(getattr(store, "window_config", None)):
            facts = _window_facts(spec, store, conn)
        else:
            check_store(store, f"store factory {spec!r}")
            conn.send(("step", "capabilities"))
            facts = {"kind": KEY_VALUE, "capabilities": GuardedStore(store).capabilities()}
    except StoreFactoryError as exc:
        conn.send(("usage", str(exc)))
        return
    except StoreFinding as exc:
        conn.send(("finding", exc.to_json()))
        return
    conn.send(("facts", {**facts, "points": declared, "import_threads": threads}))


def _window_facts(spec: str, store, conn) -> dict:
    from eos_harness.process.guard import StoreReturnType
    from eos_harness.stores.registry import WINDOW_METHODS
    from eos_harness.window_store import WindowCapabilities

    missing = [m for m in WINDOW_METHODS if not callable(getattr(store, m, None))]
    if missing:
        raise StoreFactoryError(f"store factory {spec!r} returned {type(store).__name__}, which is not a window "
                                f"store (missing {', '.join(missing)}); implement eos_harness.window_store.WindowStore")
    conn.send(("step", "window_config"))
    config = _called("window_config", store.window_config)
    semantics = getattr(config, "semantics", None)
    if not isinstance(semantics, str):
        raise StoreReturnType("window_config", f"returned {type(config).__name__}", "eos_harness.window_store.WindowConfig",
                              config)
    capabilities = None
    if callable(getattr(store, "capabilities", None)):
        conn.send(("step", "capabilities"))
        capabilities = _called("capabilities", store.capabilities)
        if not isinstance(capabilities, WindowCapabilities):
            raise StoreReturnType("capabilities", f"returned {type(capabilities).__name__}",
                                  "eos_harness.window_store.WindowCapabilities", capabilities)
    return {"kind": WINDOW, "capabilities": capabilities, "semantics": semantics}


def _called(operation: str, method):
    """``method()``; whatever it raises is a ``store_raised`` finding."""
    from eos_harness.process.guard import StoreRaised

    try:
        return method()
    except BaseException as exc:  # noqa: BLE001 - the store's to answer for
        raise StoreRaised(operation, exc) from None


def import_failure(spec: str, module_name: str, exc: BaseException) -> str:
    """The usage error for a module that could not be imported: a syntax error with its file and line,
    a module not found, or what its import raised and where."""
    if isinstance(exc, SyntaxError):
        where = f"{exc.filename}, line {exc.lineno}" if exc.filename else f"line {exc.lineno}"
        text = (exc.text or "").strip()
        return (f"store factory {spec!r}: module {module_name!r} has a syntax error: {where}: {exc.msg}"
                + (f"\n    {text}" if text else ""))
    if isinstance(exc, ModuleNotFoundError) and exc.name is not None and module_name.startswith(exc.name):
        return (f"store factory {spec!r} not found: cannot import module {module_name!r} ({exc}); "
                "check the module is on PYTHONPATH (or run from its directory)")
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}, line {frames[-1].lineno}" if frames else ""
    shown = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"store factory {spec!r}: importing module {module_name!r} raised {shown}{where}"
