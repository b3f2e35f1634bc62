"""A valid two-link config whose clusters need not be running: for tests that never reach Kafka."""

VALID_CONFIG = """\
clusters:
  us-west:
    bootstrap.servers: 127.0.0.1:19999
  us-east:
    bootstrap.servers: 127.0.0.1:29999
links:
  west-to-east:
    source: us-west
    destination: us-east
  east.to.west:
    source: us-east
    destination: us-west
    mirror.lag.alert.records: 100
"""
