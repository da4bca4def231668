"""``python -m eos_harness.cluster.docker build|nightly|cleanup``: the images built offline, the nightly
profile on Docker (``docker/nightly``), and Docker housekeeping (``make docker-image``, ``docker/build.sh``)."""

from __future__ import annotations

import contextlib
import random
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
from eos_harness.cluster.docker.containers import remove_orphans
from eos_harness.cluster.docker.engine import CLI, DockerError, ensure_dockerd
from eos_harness.cluster.docker.image import LOCAL_IMAGE, RUNNER_IMAGE, build_image, build_runner_image
from eos_harness.cluster.docker.nightly import KAFKA_SUITES, NIGHTLY_SUITES, Stopped, run_nightly


@click.group(help="The Kafka image built offline, and Docker housekeeping.")
def main() -> None:
    pass


@main.command(help=f"Build {LOCAL_IMAGE} offline (Debian packages + the cached jars); with --runner, "
                   f"{RUNNER_IMAGE} too (Debian packages + wheels pip builds here: the harness, PySpark).")
@click.option("--tag", default=None, help=f"the Kafka image's tag [default: {LOCAL_IMAGE}]")
@click.option("--runner", is_flag=True, help=f"build the nightly runner image {RUNNER_IMAGE} too")
@click.option("--rebuild-base", is_flag=True, help="debootstrap the Debian rootfs again")
@click.option("--start-dockerd", is_flag=True, help="start Debian's dockerd for the build if no engine runs "
                                                   "(stopped after)")
def build(tag: str | None, runner: bool, rebuild_base: bool, start_dockerd: bool) -> None:
    try:
        with ensure_dockerd() if start_dockerd else contextlib.nullcontext():
            reports = [build_image(tag or LOCAL_IMAGE, rebuild_base=rebuild_base)]
            if runner:
                reports.append(build_runner_image(rebuild_base=rebuild_base))
    except DockerError as exc:
        raise click.ClickException(str(exc)) from None
    for report in reports:
        click.echo(f"{report.image}: built in {report.total:.1f} s ("
                   + ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items()) + ")")


def _names(allowed: tuple[str, ...], option: str):
    def parse(ctx, param, value: str) -> tuple[str, ...]:
        names = tuple(n.strip() for n in value.split(",") if n.strip()) if value not in ("", "none") else ()
        unknown = [n for n in names if n not in allowed]
        if unknown:
            raise click.BadParameter(f"{', '.join(unknown)}: not one of {', '.join(allowed)} (or none)",
                                     param_hint=option)
        return names
    return parse


@main.command(help="The nightly profile: a Spark master and workers and three Kafka brokers in containers "
                   "(host network, 127.0.0.1), a chaos campaign per suite on them, the results in --out; every "
                   "container it started is removed at the end, also on failure or Ctrl-C. Starts Debian's dockerd "
                   "if no engine runs (stopped after); builds the images offline when missing.")
@click.option("--out", default=None, help="The run directory (default: runs/nightly-<UTC time>); it must not "
                                          "exist or be empty.")
@click.option("--suites", default=",".join(NIGHTLY_SUITES), show_default=True,
              callback=_names(NIGHTLY_SUITES, "--suites"), help="Campaigns with --engine spark on the cluster.")
@click.option("--kafka-suites", default=",".join(KAFKA_SUITES), show_default=True,
              callback=_names(KAFKA_SUITES, "--kafka-suites"),
              help="Campaigns on the three brokers (--engine spark on the same cluster); none: no brokers.")
@click.option("--scenarios", type=click.IntRange(min=1), default=20, show_default=True,
              help="Scenarios of each campaign.")
@click.option("--seed", type=int, default=None, help="The campaigns' seed (printed when not given).")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True, help="Spark workers.")
@click.option("--cores", type=click.IntRange(min=1), default=1, show_default=True, help="Cores of each worker.")
@click.option("--rebuild", is_flag=True, help="Build both images again (the Debian rootfs and wheels stay cached).")
def nightly(out: str | None, suites: tuple[str, ...], kafka_suites: tuple[str, ...], scenarios: int,
            seed: int | None, workers: int, cores: int, rebuild: bool) -> None:
    path = Path(out or f"runs/nightly-{datetime.now(UTC):%Y%m%dT%H%M%SZ}").absolute()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise click.UsageError(f"--out {out}: {path} exists and is not an empty directory")
    if not suites and not kafka_suites:
        raise click.UsageError("--suites none and --kafka-suites none: nothing to run")
    if seed is None:
        seed = random.SystemRandom().randrange(1, 2**31)
    click.echo(f"nightly: seed {seed}, run directory {path}", err=True)
    try:
        report = run_nightly(path, suites=suites, scenarios=scenarios, seed=seed, workers=workers, cores=cores,
                             kafka_suites=kafka_suites, rebuild=rebuild)
    except DockerError as exc:
        raise click.ClickException(str(exc)) from None
    except (KeyboardInterrupt, Stopped) as stop:
        click.echo(f"nightly: {'SIGTERM' if isinstance(stop, Stopped) else 'interrupted'}: every container it "
                   f"started is removed; what finished is in {path}", err=True)
        sys.exit(143 if isinstance(stop, Stopped) else 130)
    click.echo("nightly: " + ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items()), err=True)
    click.echo("nightly: exit codes " + ", ".join(f"{k} {v}" for k, v in report.exit_codes.items())
               + f"; results in {path}", err=True)
    sys.exit(report.exit_code)


@main.command(help="Remove the Kafka containers whose runner died.")
def cleanup() -> None:
    try:
        click.echo("\n".join(remove_orphans()) or "nothing to remove")
    except DockerError as exc:
        raise click.ClickException(str(exc)) from None


if __name__ == "__main__":
    main(prog_name=CLI)
