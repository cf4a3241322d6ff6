"""The run's progress line (testbed/emulation/progress.py): iterations per job from the agents' records, and the
PS ingress only when some job has a PS."""

import io

from testbed.emulation.progress import Progress, line_count
from testbed.scenario import parse_scenario

SCENARIO = """version: 1
topology: {kind: explicit, switches: [s1], hosts: [w1, w2, ps], links: [[w1, s1], [w2, s1], [ps, s1]]}
jobs: [{name: j, gradient_size: 1MB, workers: [w1, w2], %s, iterations: 3}]
"""


def test_the_progress_line_counts_iterations_and_shows_the_ps_ingress_only_with_a_ps(tmp_path):
    (tmp_path / "records").mkdir()
    assert line_count(tmp_path / "records" / "none.jsonl") == 0
    for job, with_ps in (("ps: [ps], policy: atp", True), ("policy: rar", False)):
        scenario = parse_scenario(SCENARIO % job)
        for agent in scenario.jobs[0].completion_agents:
            (tmp_path / "records" / f"{agent}.jsonl").write_text("{}\n{}\n")
        stream = io.StringIO()
        progress = Progress(scenario, tmp_path, stream)
        progress.update(2.5e6)
        line = stream.getvalue()
        assert "j (" in line and "iteration 2/3" in line
        assert ("PS ingress 2.5 Mb/s" in line) is with_ps
