"""The offsets suite (KIP-892/KIP-1035): changelog offsets and source positions kept by the store
itself, for several partitions, across crashes, reopens, upgrades and downgrades.

``checks.PROMISES`` lists its checks; each scenario module (``partitions``, ``migration``,
``closing``, ``kafka_upgrade``: Kafka Streams' own 4.3.1 -> 4.4.0 upgrade) exposes ``SCENARIOS``; ``runner.verify_offsets`` runs them all against one store.
"""
