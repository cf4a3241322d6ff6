"""The run's progress line (testbed/emulation/progress.py): iterations per job from the agents' records, and the
PS ingress only when some job has a PS."""

import io

from testbed.emulation.progress import Progress, ReaderSafeStream, line_count
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


class ClosedPipe(io.StringIO):
    """A stream whose reader went away after ``lines`` writes."""

    def __init__(self, lines):
        super().__init__()
        self.lines = lines

    def write(self, text):
        if self.lines == 0:
            raise BrokenPipeError(32, "Broken pipe")
        self.lines -= 1
        return super().write(text)

    def isatty(self):
        return True


def test_a_display_whose_reader_went_away_goes_quiet_and_raises_nothing():
    pipe = ClosedPipe(lines=1)
    display = ReaderSafeStream(pipe)
    assert display.isatty()
    display.write("first\n")
    display.flush()
    assert not display.reader_gone
    display.write("second\n")               # the reader is gone: quiet from now on
    display.write("third\n")
    display.flush()
    assert display.reader_gone and pipe.getvalue() == "first\n" and not display.isatty()
