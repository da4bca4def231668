"""KIP-868 (metadata transactions) on a real KRaft quorum: controller failover while 1,000-partition topics are created."""
