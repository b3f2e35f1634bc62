"""Requests that stay within the controller's bound on metadata records (`kafka.controller_requests`)."""

from __future__ import annotations

import pytest

from mirror_pipeline.kafka import controller_requests
from mirror_pipeline.kafka.controller_requests import initial_partitions, partition_steps, request_batches


@pytest.fixture(autouse=True)
def small_bound(monkeypatch):
    monkeypatch.setattr(controller_requests, "RECORDS_PER_REQUEST", 10)


def test_topics_are_batched_by_records_and_by_count():
    sizes = [3, 4, 3, 2, 9, 1]
    batches = request_batches(sizes, lambda n: n, at_most=3)
    assert batches == [[3, 4, 3], [2], [9, 1]]
    assert all(sum(b) <= 10 and len(b) <= 3 for b in batches)
    assert request_batches([3, 3, 3, 3], lambda n: n, at_most=2) == [[3, 3], [3, 3]]


def test_an_item_above_the_bound_is_a_request_of_its_own():
    assert request_batches([2, 12, 2], lambda n: n, at_most=100) == [[2], [12], [2]]
    assert request_batches([], lambda n: n, at_most=100) == []


def test_a_topic_too_wide_for_one_request_starts_with_what_fits_beside_its_configs():
    assert initial_partitions(5, configs=2) == 5  # 1 + 5 + 2 records fit
    assert initial_partitions(50, configs=2) == 7  # 1 + 7 + 2 = 10
    assert initial_partitions(50, configs=20) == 1  # always at least one partition


def test_partitions_are_added_in_steps_of_the_bound():
    assert partition_steps(7, 30) == [17, 27, 30]
    assert partition_steps(7, 17) == [17]
    assert partition_steps(30, 30) == [] and partition_steps(30, 7) == []
