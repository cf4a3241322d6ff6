"""How a metric is shown to people (testbed/metrics/display.py): its name in words and its values in the
readable unit its definition implies; no browser."""

import numpy as np
import pytest

from testbed.metrics.definitions import JOB_METRICS, SUMMARY_METRICS
from testbed.metrics.display import format_metric, format_value, metric_label, metric_name, metric_scale


@pytest.mark.parametrize("name, value, text", [
    ("iteration_time_s", 0.0405, "40.5 ms"),
    ("resnet50.comm_time_s", 0.02, "20 ms"),
    ("wall_s", 4.0, "4 s"),
    ("gradient_sending_rate_bps", 5e6, "5 Mb/s"),
    ("ps_ingress_bytes", 7.258e5, "726 kB"),
    ("ps_ingress_bytes", 98e6, "98 MB"),
    ("retransmission_ratio", 0.015, "1.5%"),
    ("retransmitted_packets", 12, "12 packets"),
    ("iterations_completed", np.int64(3), "3"),            # a key of a job's entry on its own
    ("distorted", False, "no"),
    ("aggregation_exact", np.bool_(True), "yes"),
    ("comm_time_s", None, "-"),
    ("comm_time_s", float("nan"), "-"),
    ("scenario", "quickstart", "quickstart"),
])
def test_a_metric_is_shown_in_the_readable_unit_of_its_definition(name, value, text):
    assert format_metric(name, value) == text


def test_the_unit_comes_from_the_definition_not_from_the_key():
    # training_throughput_iter_per_s ends in _s but its definition says count: no time unit
    assert format_metric("training_throughput_iter_per_s", 24.69) == "24.7"
    assert metric_label("training_throughput_iter_per_s", [24.69]) == "training throughput iter per s"
    # a key no definition has is shown as it is, never in exponent notation
    assert metric_name("made_up_s") == "made_up_s" and format_metric("made_up_s", 5e6) == "5,000,000"


def test_a_label_names_the_metric_in_words_with_the_unit_of_its_values():
    assert metric_label("iteration_time_s", [0.04, 0.081]) == "iteration time (ms)"
    assert metric_label("iteration_time_s", [0.04, 1.5]) == "iteration time (s)"      # the largest decides
    assert metric_label("job-b.gradient_sending_rate_bps", [2.5e9]) == "job-b gradient sending rate (Gb/s)"
    assert metric_label("ps_ingress_bytes", [241920]) == "PS ingress (kB)"
    assert metric_label("retransmitted_packets", [3]) == "retransmitted packets"        # its name says packets
    assert metric_label("fragments_sent", [3]) == "fragments sent (fragments)"


def test_values_shown_together_share_one_scale():
    scale = metric_scale("iteration_time_s", [0.0405, 0.081, float("nan")])
    assert (scale.symbol, scale.per) == ("ms", 1e-3)
    assert [scale.number(v) for v in (0.0405, 0.081, 0.0012)] == ["40.5", "81", "1.2"]


def test_values_without_a_definition_are_never_in_exponent_notation_nor_python_words():
    assert [format_value(v) for v in (5e6, 7.258e5, False, True, None, 0.12)] == \
        ["5,000,000", "725,800", "no", "yes", "-", "0.12"]


def test_a_key_the_run_and_its_jobs_both_define_has_one_unit():
    # metric_unit reads a job's key on its own from JOB_METRICS: it must not differ from the run's.
    assert {k: (SUMMARY_METRICS[k].unit, JOB_METRICS[k].unit) for k in set(SUMMARY_METRICS) & set(JOB_METRICS)
            if SUMMARY_METRICS[k].unit != JOB_METRICS[k].unit} == {}
