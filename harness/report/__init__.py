"""The HTML report of a run directory of any suite: ``eos-harness report RUN_DIR``.

:func:`load_run` reads a campaign or a single run (lifecycle or Spark) into a neutral
:class:`RunView`; :func:`render_html` draws it into one self-contained page (plotly.js and every
figure inlined: it opens offline); :func:`write_report` does both into ``RUN_DIR/report.html``.
"""

from __future__ import annotations

from eos_harness.report.load import NoRun, Problem, RunView, ScenarioView, SubjectRow, load_run
from eos_harness.report.render import REPORT_NAME, headline, render_html, write_report

__all__ = ["REPORT_NAME", "NoRun", "Problem", "RunView", "ScenarioView", "SubjectRow", "headline", "load_run",
           "render_html", "write_report"]
