"""The repository's own pytest configuration (a user's session gets only the opt-in plugin).

The harness's tests and suites run against the installed ``eos_harness`` package; Hypothesis keeps
its example database off (every suite sets ``database=None``) so no ``.hypothesis/`` is written.
"""

pytest_plugins = ["pytester"]
