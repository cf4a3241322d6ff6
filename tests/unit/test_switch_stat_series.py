"""The switches' INA counters over a run (``switch_stats.jsonl``): sampling cadence, rates, and the plot."""

import json

from testbed.metrics import counters, plots


def test_samples_are_due_once_per_interval_and_appended_as_lines(tmp_path):
    series = counters.SwitchStatSeries(tmp_path / "switch_stats.jsonl", interval_s=0.5)
    assert series.due(100.0)
    series.write(100.0, 1000.0, {"s2": {"aggregated": 0, "emitted": 0}})
    assert not series.due(100.49) and series.due(100.5)
    series.write(100.5, 1000.5, {"s2": {"aggregated": 300, "emitted": 100}})
    lines = [json.loads(line) for line in (tmp_path / "switch_stats.jsonl").read_text().splitlines()]
    assert lines == [{"t": 1000.0, "switches": {"s2": {"aggregated": 0, "emitted": 0}}},
                     {"t": 1000.5, "switches": {"s2": {"aggregated": 300, "emitted": 100}}}]
    assert counters.SAMPLED_STATS == ("aggregated", "emitted")


def test_rates_between_samples_and_the_aggregation_plot(tmp_path):
    samples = [{"t": 10.0, "switches": {"s2": {"aggregated": 0}}},
               {"t": 10.5, "switches": {"s2": {"aggregated": 300}, "s3": {"aggregated": 7}}},
               {"t": 11.5, "switches": {"s2": {"aggregated": 400}, "s3": {"aggregated": 9}}}]
    assert counters.stat_rate_series(samples, "s2", "aggregated", t0=10.0) == [(0.5, 600.0), (1.5, 100.0)]
    assert counters.stat_rate_series(samples, "s3", "aggregated", t0=10.0) == [(1.5, 2.0)]
    assert counters.stat_rate_series(samples, "s2", "emitted", t0=10.0) == []
    path = tmp_path / "aggregation_rate.png"
    plots.plot_aggregation_rates(path, "t", samples, ["s2", "s3"], contribution_payload_bytes=256, t0=10.0)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
