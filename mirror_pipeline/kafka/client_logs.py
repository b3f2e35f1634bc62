"""Where librdkafka's own log lines go: Python logging, without the lines the pipeline says better itself."""

from __future__ import annotations

import logging

from mirror_pipeline.kafka.handshake import DropConnectionFailureLogs


def quiet_logger() -> logging.Logger:
    """librdkafka's own log lines go through Python logging (not straight to stderr).

    Its warnings are mostly retries it recovers from by itself (a coordinator
    loading, a broker reconnecting); failures reach us as errors anyway.
    """
    logger = logging.getLogger("mirror_pipeline.librdkafka")
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.ERROR)
        logger.addFilter(DropConnectionFailureLogs())
        logger.addFilter(DropFencedLogs())
    return logger


class DropFencedLogs(logging.Filter):
    """Keeps librdkafka's lines about a fenced transactional writer out of the output.

    Fencing is how the pipeline hands a writer over (a pause, a stop, the next
    epoch of follow mode): the writer's next call raises it, and the pipeline
    decides on that (`is_fenced`). librdkafka also logs it as a fatal error, at
    every follow-mode epoch's end: alarming lines about something expected.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return "fenced by a newer instance" not in message and "operation with an old epoch" not in message
