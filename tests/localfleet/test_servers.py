from __future__ import annotations

from localfleet.servers import Sample, openmetrics


def test_openmetrics_groups_families_orders_by_time_and_escapes_labels() -> None:
    text = openmetrics(
        [
            Sample("DCGM_FI_DEV_GPU_UTIL", {"pod": 'a"b', "gpu": "0"}, 5.0, 200.0),
            Sample("DCGM_FI_DEV_GPU_UTIL", {"pod": 'a"b', "gpu": "0"}, 7.0, 100.0),
            Sample("DCGM_FI_DEV_FB_USED", {"gpu": "0"}, 1024.0, 100.0),
        ]
    )
    assert text.splitlines() == [
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",pod="a\\"b"} 7.0 100.000',
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",pod="a\\"b"} 5.0 200.000',
        "# TYPE DCGM_FI_DEV_FB_USED gauge",
        'DCGM_FI_DEV_FB_USED{gpu="0"} 1024.0 100.000',
        "# EOF",
    ]
