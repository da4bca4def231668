"""A campaign runs its scenarios in threads of one process: what Python itself shares between them must
not turn a scenario's verdict into an interpreter error (python/cpython#106905: a parse in one thread
switched, by a finaliser, to a parse in another failed with ``SystemError: AST constructor recursion
depth mismatch``; Hypothesis parses lambdas' source, and a CI run's store campaign got that error)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

RACE = textwrap.dedent('''
    import ast, gc, sys, threading, time
    if sys.argv[1] == "guarded":
        from eos_harness.campaign import _parse_one_at_a_time
        _parse_one_at_a_time()
    seconds = float(sys.argv[2])
    source = "\\n".join(f"def f{i}(a, b):\\n    return [x + {i} for x in (a, b) if x]" for i in range(400))
    stop, errors = False, []

    class Cycle:  # collected by the cycle collector, whose finaliser lets another thread run
        def __init__(self):
            self.me = self
        def __del__(self):
            time.sleep(0.0005)

    def other():
        while not stop:
            try:
                ast.parse("x = [1, (2, {3: 4})]")
            except SystemError as exc:
                errors.append(exc)

    gc.set_threshold(50)
    threads = [threading.Thread(target=other) for _ in range(2)]
    for t in threads:
        t.start()
    started = time.time()
    while time.time() - started < seconds and not errors:
        for _ in range(50):
            Cycle()
        try:
            ast.parse(source)
        except SystemError as exc:
            errors.append(exc)
    stop = True
    for t in threads:
        t.join()
    print(len(errors), *errors[:1])
''')


def _race(mode: str, seconds: float) -> str:
    done = subprocess.run([sys.executable, "-c", RACE, mode, str(seconds)], capture_output=True, text=True,
                          timeout=seconds + 60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_parsing_in_a_campaigns_threads_never_fails_with_pythons_shared_recursion_depth():
    # The race bites here without the guard (within half a second on this machine's Python 3.11)...
    unguarded = _race("plain", 20)
    assert unguarded.startswith("1 AST constructor recursion depth mismatch"), unguarded
    # ...and not with it, for several times as long.
    assert _race("guarded", 3) == "0"
