"""Kafka I/O through confluent-kafka: clients per role, topic configs, and the one
place that turns Kafka's errors into the project's (never quoting client settings).
"""
