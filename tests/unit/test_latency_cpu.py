"""The latency benchmark's CPU over the steady load alone: the difference of two marks."""

from benchmarks.latency_cpu import CpuSampler


class _Meter:
    """Snapshots as `throughput.CpuMeter` makes them, from a script: per pid its role and CPU seconds."""

    def __init__(self, snapshots):
        self.snapshots = iter(snapshots)

    def snapshot(self):
        return next(self.snapshots)


def _snap(wall, machine_busy, **pids):
    return {"wall": wall, "machine_busy": machine_busy, "pids": {int(k[1:]): v for k, v in pids.items()}}


def test_the_cpu_between_two_marks_leaves_out_what_came_before_and_after():
    sampler = CpuSampler(
        _Meter(
            [
                _snap(0.0, 0.0, p1=("broker", 5.0)),
                _snap(10.0, 20.0, p1=("broker", 9.0), p2=("spark-python", 3.0)),  # the load starts
                _snap(250.0, 300.0, p1=("broker", 100.0), p2=("spark-python", 60.0)),  # and ends
                _snap(300.0, 400.0, p1=("broker", 130.0)),  # the copier has exited
            ]
        )
    )
    sampler.mark("load")
    sampler.mark("load-end")
    whole = sampler.stop()
    assert sampler.between("load", "load-end") == {"broker": 91.0, "spark-python": 57.0, "wall": 240.0}
    assert (whole["broker"], whole["spark-python"], whole["wall"]) == (125.0, 60.0, 300.0)
    assert sampler.between("load", "never made") == {}
