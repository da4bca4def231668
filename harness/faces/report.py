"""CLI of the HTML report: ``eos-harness report RUN_DIR``, and the report ``run`` and ``chaos`` write
at their end (unless ``--no-report``).

Exit codes of ``report``: 0 the report was written from a run read in full; 2 RUN_DIR holds no run, or
the report cannot be written where asked (a directory, a device, a link; RUN_DIR in use by a running
command: then ``--out FILE`` elsewhere writes the report of what finished so far) — nothing written;
3 the report was written, but some file of the run is truncated or corrupt (each is named at the top
of the page and here), or it could not be written (a full disk). The run's own verdict is not the report's exit
code: ``run`` and ``chaos`` say that.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
from eos_harness.verdict import EXIT_INCOMPLETE, EXIT_PASS, EXIT_USAGE, error_reason
from rich.console import Console

__all__ = ["NO_REPORT_HELP", "report_command", "write_run_report"]

console = Console(width=None if sys.stdout.isatty() else 160)
NO_REPORT_HELP = "Do not write the HTML report (RUN_DIR/report.html) at the end."


def write_run_report(run_dir: Path, campaign_json: str | Path | None = None) -> Path | None:
    """Write ``run_dir``'s report at the end of a command and print its path. A report that cannot
    be written is a warning: it never changes the verdict or the exit code of the run."""
    try:
        from eos_harness.report import write_report
    except ImportError as exc:
        console.print(f"[yellow]report not written: {exc.name} is not installed; install it with "
                      "pip install -e . (or make setup)[/]", soft_wrap=True)
        return None
    try:
        path, view = write_report(run_dir, campaign_json=campaign_json)
    except Exception as exc:  # noqa: BLE001 - the run's results are written; the report is a view of them
        console.print(f"[yellow]report not written: {error_reason(exc)}[/]", soft_wrap=True, highlight=False)
        return None
    console.print(f"report: {path}" + (f" ({len(view.problems)} file(s) could not be read in full)"
                                       if view.problems else ""), soft_wrap=True, highlight=False)
    return path


@click.command("report")
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--out", default=None, type=click.Path(path_type=Path),
              help="Write the report here (default RUN_DIR/report.html).")
@click.option("--json", "campaign_json", default=None, type=click.Path(path_type=Path),
              help="The campaign JSON, when `chaos --json FILE` wrote it outside RUN_DIR.")
def report_command(run_dir: Path, out: Path | None, campaign_json: Path | None) -> None:
    """Write one self-contained HTML report (no network needed) of the campaign or run in RUN_DIR, of
    any suite. Exit 0: written; 2: RUN_DIR holds no run; 3: written, but a file of the run is
    truncated or corrupt (named at the top of the report)."""
    from eos_harness.report import REPORT_NAME, NoRun, write_report
    from eos_harness.rundir import RunDirError, hold, is_marked

    try:
        target = out if out is not None else run_dir / REPORT_NAME
        if is_marked(run_dir) and os.path.realpath(target.absolute().parent) == os.path.realpath(run_dir):
            # Written into the run directory: never while another command (a running campaign) owns it.
            try:
                hold(run_dir)
            except RunDirError as exc:
                raise RunDirError(f"{exc}; or write the report of what finished so far elsewhere "
                                  "with --out FILE") from None
        path, view = write_report(run_dir, out, campaign_json)
    except (NoRun, RunDirError) as exc:
        console.print(f"[red]no report:[/] {exc}", soft_wrap=True, highlight=False)
        sys.exit(EXIT_USAGE)
    except OSError as exc:
        console.print(f"[red]report not written:[/] {error_reason(exc)}", soft_wrap=True, highlight=False)
        sys.exit(EXIT_INCOMPLETE)
    for problem in view.problems:
        console.print(f"[yellow]{problem.file}[/]: {problem.what}", soft_wrap=True, highlight=False)
    from eos_harness.report import headline

    console.print(headline(view)[1], soft_wrap=True, highlight=False, markup=False)
    console.print(f"report: {path}", soft_wrap=True, highlight=False)
    sys.exit(EXIT_INCOMPLETE if view.problems else EXIT_PASS)
