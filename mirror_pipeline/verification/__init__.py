"""`verify`: compare a mirror with its source over their common range (R-REL-4).

Pure logic (which offsets to compare, checksums, narrowing to the first
difference, sampling, the read throttle) lives apart from Kafka I/O so it can
be tested without brokers:

- `ranges`: the offset map as an index both ways, the common range, blocks,
  sampling and splitting into tasks;
- `checksum`: the checksum of a run of records, as each side sees it;
- `compare`: the first differing source offset of two record streams;
- `throttle`: a token bucket for the read rate;
- `results`: the result objects;
- `reader`, `task`, `spark_job`, `planner`: reading partitions, one Spark
  task's work, the Spark job, and the driver that plans and assembles.
"""
