"""``python -m eos_harness.cluster.docker build|cleanup``: the Kafka image built offline, and Docker
housekeeping (``make docker-image``, ``docker/build.sh``)."""

from __future__ import annotations

import contextlib

import click
from eos_harness.cluster.docker.containers import remove_orphans
from eos_harness.cluster.docker.engine import CLI, DockerError, ensure_dockerd
from eos_harness.cluster.docker.image import LOCAL_IMAGE, build_image


@click.group(help="The Kafka image built offline, and Docker housekeeping.")
def main() -> None:
    pass


@main.command(help=f"Build {LOCAL_IMAGE} offline (Debian packages + the cached jars).")
@click.option("--tag", default=LOCAL_IMAGE, show_default=True, help="the image's tag")
@click.option("--rebuild-base", is_flag=True, help="debootstrap the Debian rootfs again")
@click.option("--start-dockerd", is_flag=True, help="start Debian's dockerd for the build if no engine runs "
                                                   "(stopped after)")
def build(tag: str, rebuild_base: bool, start_dockerd: bool) -> None:
    try:
        with ensure_dockerd() if start_dockerd else contextlib.nullcontext():
            report = build_image(tag, rebuild_base=rebuild_base)
    except DockerError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{report.image}: built in {report.total:.1f} s")


@main.command(help="Remove the Kafka containers whose runner died.")
def cleanup() -> None:
    try:
        click.echo("\n".join(remove_orphans()) or "nothing to remove")
    except DockerError as exc:
        raise click.ClickException(str(exc)) from None


if __name__ == "__main__":
    main(prog_name=CLI)
