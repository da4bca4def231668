"""Open any broker spec for a suite: one context manager, the way every suite gets its broker.

``with open_broker(parse("kafka-local:3")) as opened:`` starts three Kafka brokers on 127.0.0.1
(:class:`eos_harness.cluster.LocalKafka`) and stops them when the block ends, whatever happens in
it; ``opened.spec`` is the broker for scenarios (``kafka://127.0.0.1:…``, whose CLI text stays
``kafka-local:3`` for replay commands), ``opened.bootstrap_servers`` its address, ``opened.cluster``
the started cluster (for faults that kill or stop brokers). ``kafka-quorum[:N]`` starts a KRaft
quorum of 3 dedicated controllers and N brokers the same way
(:func:`eos_harness.cluster.quorum.suite_quorum`; its address and faults name the brokers only). A ``kafka://`` spec is checked to
answer first (a ClusterError naming the address, rather than every scenario timing out); an
``embedded`` spec opens as itself (each scenario makes its own SQLite file).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eos_harness.broker.spec import QUORUM_CONTROLLERS, BrokerSpec, parse

if TYPE_CHECKING:
    from eos_harness.cluster.local import KafkaCluster

__all__ = ["OpenBroker", "open_broker"]

REACHABLE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class OpenBroker:
    """A broker ready for a suite's scenarios."""

    spec: BrokerSpec  # what scenarios run on (a started kafka-local is a kafka:// spec named kafka-local)
    cluster: KafkaCluster | None = None  # the cluster started here, else None

    @property
    def bootstrap_servers(self) -> str | None:
        """``HOST:PORT[,…]`` of a Kafka broker; None for the embedded one."""
        return self.spec.bootstrap_servers if self.spec.kind == "kafka" else None


@contextlib.contextmanager
def open_broker(spec: BrokerSpec | str, say: Callable[[str], object] = lambda text: None) -> Iterator[OpenBroker]:
    """Yield ``spec`` opened: ``kafka-local[:N]`` or ``kafka-quorum[:N]`` started (and always stopped
    on exit), ``kafka://`` checked to answer, ``embedded`` as it is. ``say`` receives progress lines (a cluster starting)."""
    spec = parse(spec)
    if spec.kind == "kafka":
        check_answers(spec)
        yield OpenBroker(spec)
        return
    if spec.kind == "embedded":
        yield OpenBroker(spec)
        return
    from eos_harness.cluster import LocalKafka
    from eos_harness.cluster.quorum import suite_quorum

    if spec.kind == "kafka-quorum":
        say(f"starting a KRaft quorum on 127.0.0.1: {QUORUM_CONTROLLERS} dedicated controllers and "
            + ("one broker …" if spec.brokers == 1 else f"{spec.brokers} brokers …"))
        starting: KafkaCluster = suite_quorum(spec.brokers, controllers=QUORUM_CONTROLLERS)
    else:
        say("starting a local Kafka broker on 127.0.0.1 …" if spec.brokers == 1
            else f"starting {spec.brokers} local Kafka brokers on 127.0.0.1 …")
        starting = LocalKafka(brokers=spec.brokers)
    with starting as cluster:
        say(f"Kafka up on {cluster.bootstrap_servers}")
        yield OpenBroker(spec.started_at(cluster.bootstrap_servers), cluster)


def check_answers(spec: BrokerSpec, timeout: float = REACHABLE_TIMEOUT_S) -> None:
    """Raise ClusterError, naming the address and what to do, unless a broker answers at ``spec``."""
    from eos_harness.broker import BrokerError, kafka_client
    from eos_harness.cluster import ClusterError

    try:
        kafka_client.check_reachable(kafka_client.admin_client(spec), spec.bootstrap_servers, timeout)
    except BrokerError as exc:
        raise ClusterError(f"{exc}; start one there, or use --broker kafka-local to have the harness "
                           "start one on 127.0.0.1") from None
