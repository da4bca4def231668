"""Broker specs as values: the text of ``--broker`` parsed once into a :class:`BrokerSpec`.

The forms a user may write (on the command line, in a suite's options):

- ``embedded``: the SQLite log (nothing to install); the harness gives each scenario its own file.
- ``kafka-local`` / ``kafka-local:N``: N (1 to 5) Kafka brokers started on 127.0.0.1 from the
  pinned jars for the command, and stopped at its end. Each is broker and controller at once.
- ``kafka-quorum`` / ``kafka-quorum:N``: a KRaft quorum of 3 dedicated controllers and N (1 to 5)
  brokers, started the same way (:class:`eos_harness.cluster.quorum.KafkaQuorum`); broker faults act
  on its brokers, never on its controllers.
- ``kafka://HOST:PORT[,HOST:PORT…][?key=value&…]``: a Kafka cluster you run; the properties after
  ``?`` are client properties (e.g. ``transaction.timeout.ms=5000``) for the tasks' transactional
  producers (see :mod:`eos_harness.broker.kafka`).

``embedded:PATH`` (one SQLite file) is the harness's own form, what it hands a scenario's task
processes: :func:`parse` accepts it only with ``internal=True``, so ``--broker embedded:x`` is a
usage error rather than a broker file shared by every scenario of a campaign.

A spec knows its runtime text (what :func:`eos_harness.broker.connect` opens), its CLI text (what a
replay command says: ``kafka-local`` for a cluster the harness started at ``kafka://127.0.0.1:…``),
its bootstrap servers and client properties. Opening one (starting a local cluster or quorum, checking
that a remote one answers) is :func:`eos_harness.broker.opening.open_broker`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, urlencode

__all__ = ["EMBEDDED", "MAX_LOCAL_BROKERS", "QUORUM_CONTROLLERS", "BrokerSpec", "parse"]

MAX_LOCAL_BROKERS = 5
QUORUM_CONTROLLERS = 3
FORMS = ("embedded (SQLite log, nothing to install), kafka-local or kafka-local:N (N = 1 to "
         f"{MAX_LOCAL_BROKERS} Kafka brokers started on 127.0.0.1), kafka-quorum or kafka-quorum:N "
         f"({QUORUM_CONTROLLERS} dedicated KRaft controllers and N = 1 to {MAX_LOCAL_BROKERS} brokers started on "
         "127.0.0.1), or kafka://HOST:PORT[,HOST:PORT][?key=value&…] (a Kafka cluster you run, client "
         "properties after '?')")

Kind = Literal["embedded", "kafka-local", "kafka-quorum", "kafka"]
STARTED_HERE = ("kafka-local", "kafka-quorum")


@dataclass(frozen=True)
class BrokerSpec:
    """One broker, as a value. Build it with :func:`parse`; the fields are its parts.

    ``kind``: ``embedded``, ``kafka-local`` or ``kafka-quorum`` (to be started) or ``kafka`` (an address).
    ``path``: the SQLite file of ``embedded:PATH`` (None: each scenario gets its own).
    ``brokers``: how many brokers ``kafka-local`` or ``kafka-quorum`` starts. ``servers``: the ``HOST:PORT`` of a
    ``kafka`` spec. ``properties``: its client properties, in order. ``named``: the CLI text when
    it differs from the runtime one (a ``kafka-local`` the harness started, an embedded file)."""

    kind: Kind
    path: str | None = None
    brokers: int = 1
    servers: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    named: str | None = None

    # -- text ---------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """The runtime text: what :func:`eos_harness.broker.connect` opens and :func:`parse` reads back."""
        if self.kind == "embedded":
            return "embedded" if self.path is None else f"embedded:{self.path}"
        if self.kind in STARTED_HERE:
            return self.kind if self.brokers == 1 else f"{self.kind}:{self.brokers}"
        query = f"?{urlencode(self.properties, safe=':/,')}" if self.properties else ""
        return f"kafka://{','.join(self.servers)}{query}"

    @property
    def cli_text(self) -> str:
        """How ``--broker`` names this broker (for replay commands and campaign JSON)."""
        return self.named or self.text

    def __str__(self) -> str:
        return self.text

    # -- parts --------------------------------------------------------------------------------
    @property
    def is_kafka(self) -> bool:
        """A Kafka broker (to be started, or at an address), not the embedded log."""
        return self.kind != "embedded"

    @property
    def bootstrap_servers(self) -> str:
        """``HOST:PORT[,HOST:PORT…]`` of a ``kafka://`` spec (a ``kafka-local`` one has none until started)."""
        if self.kind != "kafka":
            raise ValueError(f"broker {self.cli_text!r} has no address yet: open it first "
                             "(eos_harness.broker.opening.open_broker starts kafka-local and kafka-quorum)")
        return ",".join(self.servers)

    @property
    def client_properties(self) -> dict[str, str]:
        return dict(self.properties)

    # -- derived specs ------------------------------------------------------------------------
    def with_properties(self, properties: Mapping[str, object]) -> BrokerSpec:
        """The same Kafka broker with these client properties set (replacing any of the same name)."""
        if self.kind != "kafka":
            raise ValueError(f"client properties need a kafka://HOST:PORT spec, not {self.cli_text!r}")
        merged = dict(self.properties)
        merged.update({str(k): str(v) for k, v in properties.items()})
        return replace(self, properties=tuple(merged.items()))

    def at_file(self, path: str | Path) -> BrokerSpec:
        """An ``embedded`` spec's log in its own SQLite file ``path`` (one per scenario)."""
        if self.kind != "embedded":
            raise ValueError(f"only the embedded broker has a file, not {self.cli_text!r}")
        return replace(self, path=str(path), named=self.cli_text)

    def started_at(self, bootstrap_servers: str) -> BrokerSpec:
        """A ``kafka-local`` or ``kafka-quorum`` spec once its cluster runs at ``bootstrap_servers`` (its
        CLI text stays)."""
        if self.kind not in STARTED_HERE:
            raise ValueError(f"only kafka-local and kafka-quorum are started by the harness, not {self.cli_text!r}")
        return BrokerSpec("kafka", servers=_servers(bootstrap_servers, bootstrap_servers), named=self.cli_text)


EMBEDDED = BrokerSpec("embedded")


def parse(text: str | BrokerSpec, *, internal: bool = False) -> BrokerSpec:
    """The :class:`BrokerSpec` of ``text``; ValueError naming the accepted forms when it is none.

    ``internal=True`` also accepts ``embedded:PATH``, the form the harness hands its own task
    processes (never a user's: a campaign gives every scenario its own file)."""
    if isinstance(text, BrokerSpec):
        return text
    text = text.strip()
    if text == "embedded":
        return EMBEDDED
    if text.startswith("embedded:"):
        path = text.removeprefix("embedded:")
        if not internal:
            raise ValueError(f"broker {text!r}: the embedded broker takes no file on the command line (the "
                             "harness gives each scenario its own SQLite file); write embedded")
        if not path:
            raise ValueError(f"broker {text!r}: embedded:PATH needs a file path")
        return BrokerSpec("embedded", path=path)
    kind, colon, count = text.partition(":")
    if kind in STARTED_HERE:
        if not colon:
            count = "1"
        if not count.isdigit() or not 1 <= int(count) <= MAX_LOCAL_BROKERS:
            raise ValueError(f"broker {text!r}: the broker count after '{kind}:' must be 1 to "
                             f"{MAX_LOCAL_BROKERS}, e.g. {kind}:3")
        return BrokerSpec(kind, brokers=int(count))
    if text.startswith("kafka://"):
        address, _, query = text.removeprefix("kafka://").partition("?")
        servers = _servers(address, text)
        try:
            properties = tuple(parse_qsl(query, strict_parsing=True)) if query else ()
        except ValueError:
            raise ValueError(f"broker {text!r}: the client properties after '?' must be key=value pairs "
                             "joined by '&', e.g. kafka://127.0.0.1:9092?transaction.timeout.ms=5000") from None
        return BrokerSpec("kafka", servers=servers, properties=tuple(dict(properties).items()))
    raise ValueError(f"unknown broker {text!r}: use {FORMS}")


def _servers(address: str, text: str) -> tuple[str, ...]:
    hosts = tuple(h.strip() for h in address.split(","))
    for host in hosts:
        name, colon, port = host.rpartition(":")
        if not (name and colon and port.isdigit() and 0 < int(port) < 65536):
            raise ValueError(f"broker {text!r}: {repr(host) if host else 'an empty address'} is not HOST:PORT; "
                             "write kafka://HOST:PORT[,HOST:PORT], e.g. kafka://127.0.0.1:9092")
    return hosts
