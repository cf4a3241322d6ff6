"""A job's ``training:`` section: resolved into a TrainingSpec whose model sets the job's gradient, and
refused, one line naming the field, when it is wrong or meets a gradient stated otherwise."""

import dataclasses
import textwrap

import pytest
from test_scenario import BASE     # one rack: w1, w2 and a PS under s1, a job under atp

from testbed.errors import ScenarioError
from testbed.scenario import parse_scenario
from testbed.training import models

def parse(text):
    return parse_scenario(textwrap.dedent(text), "test.yaml", ())


def error_of(text):
    with pytest.raises(ScenarioError) as info:
        parse(text)
    return info.value


def test_a_job_without_training_keeps_synthetic_gradients():
    assert parse(BASE).jobs[0].training is None


def test_training_resolves_with_defaults_and_the_gradient_is_the_models_unscaled():
    job = parse(BASE + "    training: {model: mlp, target_accuracy: 0.7}\n").jobs[0]
    t = job.training
    assert (t.model, t.dataset, t.learning_rate, t.momentum, t.batch_size, t.eval_every, t.target_accuracy) == \
        ("mlp", "blobs", 0.1, 0.9, 32, 5, 0.7)
    assert job.model == "mlp"
    assert job.submodel_elements == models.tensor_sizes("mlp", (32,), 10)       # one layer group per tensor
    assert job.gradient_bytes == 4 * models.parameter_count("mlp", (32,), 10)   # not scaled by 0.001


def test_a_cnn_trains_on_the_patterns_in_the_layer_groups_asked_for():
    job = parse(BASE + "    submodels: 2\n    training: {model: cnn, batch_size: 8, eval_every: 2}\n").jobs[0]
    assert job.training.dataset == "patterns" and len(job.submodel_elements) == 2
    assert sum(job.submodel_elements) == models.parameter_count("cnn", (1, 8, 8), 10)


@pytest.mark.parametrize("extra,field,says", [
    ("    model: resnet50\n    training: {model: mlp}\n", "jobs.0.model", "remove model"),
    ("    gradient_size: 1MB\n    training: {model: mlp}\n", "jobs.0.gradient_size", "remove gradient_size"),
    ("    training: {model: resnet}\n", "jobs.0.training.model", "expected one of mlp, cnn"),
    ("    training: {dataset: blobs}\n", "jobs.0.training.model", "missing (required)"),
    ("    training: {model: cnn, dataset: blobs}\n", "jobs.0.training.dataset", "cnn takes square images"),
    ("    training: {model: mlp, learnig_rate: 0.1}\n", "jobs.0.training.learnig_rate",
     "did you mean learning_rate?"),
    ("    training: {model: mlp, batch_size: 5000}\n", "jobs.0.training.batch_size", "[1, 2000]"),
    ("    training: {model: mlp, target_accuracy: 1.5}\n", "jobs.0.training.target_accuracy", "<= 1"),
    ("    training: {model: mlp, momentum: 1}\n", "jobs.0.training.momentum", "<= 0.999"),
    ("    submodels: 5\n    training: {model: mlp}\n", "jobs.0.submodels", "[1, 4]"),
    ("    training: mlp\n", "jobs.0.training", "expected a mapping"),
])
def test_a_bad_training_section_is_one_line_naming_its_field(extra, field, says):
    err = error_of(BASE + extra)
    assert err.field == field and says in err.message and "\n" not in str(err)


def test_a_ring_job_does_not_train():
    text = BASE.replace("    ps: ps\n    policy: atp\n", "    policy: rar\n") + "    training: {model: mlp}\n"
    err = error_of(text)
    assert err.field == "jobs.0.training" and "ring all-reduce" in err.message


def test_the_planner_counts_the_workers_real_work_measured_here_in_the_machines_budget():
    from support import require_torch
    require_torch()
    from testbed.budget import packet_budget
    scenario = parse(BASE.replace("    policy: atp\n", "    policy: atp\n    compute_time: 20ms\n"
                                  "    training: {model: mlp}\n"))
    budget = packet_budget(scenario, "pyswitch", cores=2)
    assert set(budget.training_cores) == {"w1", "w2"} and all(0 < c < 1 for c in budget.training_cores.values())
    without = dataclasses.replace(budget, training_cores={})
    added = budget.cores_busy(1.0) - without.cores_busy(1.0)
    assert added == pytest.approx(sum(budget.training_cores.values()))
    assert budget.cores_busy(4.0) - without.cores_busy(4.0) == pytest.approx(added / 4)   # N divides it
    assert any("of them training" in need for need in budget.needs())
    assert budget.to_dict(1.0)["training_cores"].keys() == {"w1", "w2"}


def test_the_agents_wait_for_readiness_grows_with_the_workers_that_load_a_model_not_with_the_others():
    from types import SimpleNamespace
    from testbed.emulation.launch import READY_TIMEOUT_S, TRAINING_SET_UP_CPU_S, agents_ready_timeout_s
    synthetic = parse(BASE)
    training = parse(BASE.replace("    policy: atp\n", "    policy: atp\n    training: {model: mlp}\n"))
    on_two_cores = [SimpleNamespace(scenario=s, budget=SimpleNamespace(cores=2)) for s in (synthetic, training)]
    assert agents_ready_timeout_s(on_two_cores[0]) == READY_TIMEOUT_S
    assert agents_ready_timeout_s(on_two_cores[1]) == READY_TIMEOUT_S + TRAINING_SET_UP_CPU_S * 2 / 2
