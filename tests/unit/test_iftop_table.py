"""Unit tests for the iftop-style table: rate windows, iftop's units, format/parse round trips."""

import json

import pytest

from testbed.metrics.iftop import (
    IFTOP_WINDOWS_S,
    format_iftop_table,
    load_samples,
    pair_rates,
    parse_iftop_output,
    parse_readable_size,
    readable_size,
    run_iftop_command,
)

# Real `iftop -t -s 4 -n -N -B -L 100 -c /dev/null` output (iftop 1.0pre4, Debian 12),
# captured in two veth namespaces: 2000 UDP datagrams of IP length 1000 B from
# 10.99.0.1, then 1-byte keepalives (IP length 29 B) from 10.99.0.3.
REAL_IFTOP_BYTES_OUTPUT = """\
Listening on vb60afa4
   # Host name (port/service if enabled)            last 2s   last 10s   last 40s cumulative
--------------------------------------------------------------------------------------------
   1 10.99.0.2                                =>         0B         0B         0B         0B
     10.99.0.1                                <=         0B      488KB      488KB     1.91MB
   2 10.99.0.2                                =>         0B         0B         0B         0B
     10.99.0.3                                <=       580B       334B       334B     1.30KB
--------------------------------------------------------------------------------------------
Total send rate:                                         0B         0B         0B
Total receive rate:                                    580B      489KB      489KB
Total send and receive rate:                           580B      489KB      489KB
--------------------------------------------------------------------------------------------
Peak rate (sent/received/total):                         0B      977KB      977KB
Cumulative (sent/received/total):                        0B     1.91MB     1.91MB
============================================================================================

"""

A, B, C = "10.99.0.1", "10.99.0.2", "10.99.0.3"


def _samples(duration_s, rate_bytes_per_s, interval_s=1.0, t0_s=1000.0):
    """Cumulative samples: pair name -> function(t) of bytes/s."""
    samples = []
    totals = {pair: 0.0 for pair in rate_bytes_per_s}
    steps = int(round(duration_s / interval_s))
    for i in range(steps + 1):
        t = i * interval_s
        if i:
            for pair, rate in rate_bytes_per_s.items():
                totals[pair] += rate(t) * interval_s
        samples.append((t0_s + t, {p: int(round(v)) for p, v in totals.items() if v > 0 or i == 0}))
    return samples


# --------------------------------------------------------------------------- pair_rates

def test_constant_rate_all_windows():
    samples = _samples(60, {f"{A}>{B}": lambda t: 1000.0})
    rates = pair_rates(samples)
    rate = rates[f"{A}>{B}"]
    assert rate.rates_bps == pytest.approx((8000.0, 8000.0, 8000.0))
    assert rate.cumulative_bytes == 60_000


def test_step_change_separates_windows():
    # silent for 50 s, then 1000 B/s for the last 10 s
    samples = _samples(60, {f"{A}>{B}": lambda t: 1000.0 if t > 50 else 0.0})
    rate = pair_rates(samples)[f"{A}>{B}"]
    r2, r10, r40 = rate.rates_bps
    assert r2 == pytest.approx(8000.0)
    assert r10 == pytest.approx(8000.0)
    assert r40 == pytest.approx(8000.0 * 10 / 40)
    assert rate.cumulative_bytes == 10_000


def test_burst_only_in_last_two_seconds():
    samples = _samples(60, {f"{A}>{B}": lambda t: 5000.0 if t > 58 else 0.0})
    r2, r10, r40 = pair_rates(samples)[f"{A}>{B}"].rates_bps
    assert r2 == pytest.approx(40_000.0)
    assert r10 == pytest.approx(40_000.0 * 2 / 10)
    assert r40 == pytest.approx(40_000.0 * 2 / 40)


def test_short_history_averages_over_what_exists():
    # 5 s of history: the 10 s and 40 s windows average over 5 s, as iftop does
    samples = _samples(5, {f"{A}>{B}": lambda t: 2000.0})
    r2, r10, r40 = pair_rates(samples)[f"{A}>{B}"].rates_bps
    assert r2 == pytest.approx(16_000.0)
    assert r10 == pytest.approx(16_000.0)
    assert r40 == pytest.approx(16_000.0)


def test_pair_appearing_late_counts_zero_before():
    samples = _samples(20, {f"{A}>{B}": lambda t: 1000.0})
    # C>B appears only in the last 4 samples (absent keys = 0 bytes)
    extra = 0
    patched = []
    for i, (t, pairs) in enumerate(samples):
        pairs = dict(pairs)
        if i >= len(samples) - 4:
            extra += 500
            pairs[f"{C}>{B}"] = extra
        patched.append((t, pairs))
    rates = pair_rates(patched)
    r2, r10, _ = rates[f"{C}>{B}"].rates_bps
    assert r2 == pytest.approx(500 * 8 * 2 / 2)
    assert r10 == pytest.approx(2000 * 8 / 10)
    assert rates[f"{C}>{B}"].cumulative_bytes == 2000


def test_jittered_samples_and_single_window():
    # 0.5 s sampling with a few ms of jitter: the 2 s window uses the nearest sample
    samples = []
    for i in range(41):
        t = 100.0 + 0.5 * i + (0.004 if i % 3 == 0 else -0.003)
        samples.append((t, {f"{A}>{B}": int(round(1250.0 * (t - 100.0)))}))
    (rate,) = pair_rates(samples, 2.0)[f"{A}>{B}"].rates_bps
    assert rate == pytest.approx(10_000.0, rel=0.01)


def test_empty_and_single_sample():
    assert pair_rates([]) == {}
    rates = pair_rates([(1.0, {f"{A}>{B}": 42})])
    assert rates[f"{A}>{B}"].rates_bps == (0.0, 0.0, 0.0)
    assert rates[f"{A}>{B}"].cumulative_bytes == 42


# --------------------------------------------------------------------------- units

@pytest.mark.parametrize("n_bytes, unit, text", [
    (0, "bytes", "    0B"),
    (576, "bytes", "  576B"),
    (1146.88, "bytes", " 1.12KB"),
    (500_000, "bytes", "  488KB"),
    (2_000_000, "bytes", " 1.91MB"),
    (1331, "bytes", " 1.30KB"),
    (72.5, "bits", "  580b"),
    (1000, "bits", " 7.81Kb"),
    (1_000_000, "bits", " 7.63Mb"),
    (10 * 1024 ** 3, "bytes", " 10.0GB"),
])
def test_readable_size_matches_iftop(n_bytes, unit, text):
    assert readable_size(n_bytes, unit) == text


@pytest.mark.parametrize("token, n_bytes", [
    ("0B", 0), ("576B", 576), ("1.12KB", 1.12 * 1024), ("1.91MB", 1.91 * 1024 ** 2),
    ("580b", 72.5), ("7.81Kb", 7.81 * 1024 / 8), ("2.00Gb", 2 * 1024 ** 3 / 8),
])
def test_parse_readable_size(token, n_bytes):
    assert parse_readable_size(token) == pytest.approx(n_bytes)


def test_parse_readable_size_rejects_garbage():
    with pytest.raises(ValueError):
        parse_readable_size("12 parsecs")


# --------------------------------------------------------------------------- parse real iftop

def test_parse_real_iftop_output():
    parsed = parse_iftop_output(REAL_IFTOP_BYTES_OUTPUT)
    assert parsed["sent_bytes"] == 0
    assert parsed["received_bytes"] == pytest.approx(2_000_000, rel=0.005)
    assert parsed["total_bytes"] == parsed["received_bytes"]
    assert parsed["pairs"][f"{A}>{B}"] == pytest.approx(2_000_000, rel=0.005)
    assert parsed["pairs"][f"{B}>{A}"] == 0
    assert parsed["pairs"][f"{C}>{B}"] == pytest.approx(1331, rel=0.005)
    assert parsed["pair_rates_bps"][f"{A}>{B}"] == pytest.approx((0.0, 488 * 1024 * 8, 488 * 1024 * 8))
    assert parsed["receive_rate_bps"][0] == pytest.approx(580 * 8)
    assert parsed["peak_bps"] == pytest.approx((0.0, 977 * 1024 * 8, 977 * 1024 * 8))


def test_parse_takes_last_complete_block():
    first = REAL_IFTOP_BYTES_OUTPUT.replace("1.91MB     1.91MB", "1.00MB     1.00MB")
    torn = "   # Host name (port/service if enabled)\n-----\n   1 10.0.0.1 => 1b 1b 1b 1B\n"
    parsed = parse_iftop_output(first + REAL_IFTOP_BYTES_OUTPUT + torn)
    assert parsed["received_bytes"] == pytest.approx(2_000_000, rel=0.005)


def test_parse_without_table_raises():
    with pytest.raises(ValueError):
        parse_iftop_output("Listening on eth0\n")


# --------------------------------------------------------------------------- format

def _two_way_samples():
    return _samples(60, {
        f"{A}>{B}": lambda t: 300_000.0,       # bulk towards B
        f"{B}>{A}": lambda t: 9_000.0,         # acks back
        f"{C}>{B}": lambda t: 1_000.0 if t > 30 else 0.0,
    })


def test_format_layout_matches_real_iftop_line_widths():
    text = format_iftop_table(_two_way_samples(), "vb60afa4", local_ip=B, rate_unit="bytes")
    mine = text.splitlines()
    real = REAL_IFTOP_BYTES_OUTPUT.splitlines()
    assert mine[:3] == real[:3]  # "Listening on", heading, divider: identical
    assert text.endswith("=" * 92 + "\n\n")
    # same widths and label columns as iftop's lines of the same kind
    for prefix in ("Total send rate:", "Total receive rate:", "Total send and receive rate:",
                   "Peak rate (sent/received/total):", "Cumulative (sent/received/total):"):
        (r,) = [line for line in real if line.startswith(prefix)]
        (m,) = [line for line in mine if line.startswith(prefix)]
        assert len(m) == len(r)
    pair_lines = [line for line in mine if "=>" in line or "<=" in line]
    assert all(len(line) == 92 for line in pair_lines)
    assert pair_lines[0].index("=>") == real[3].index("=>")
    assert pair_lines[1].index("<=") == real[4].index("<=")


def test_format_parse_round_trip_bits_and_bytes():
    samples = _two_way_samples()
    rates = pair_rates(samples)
    for unit in ("bits", "bytes"):
        parsed = parse_iftop_output(format_iftop_table(samples, "veth0", local_ip=B, rate_unit=unit))
        assert set(parsed["pairs"]) == {f"{B}>{A}", f"{A}>{B}", f"{B}>{C}", f"{C}>{B}"}
        for pair, rate in rates.items():
            assert parsed["pairs"][pair] == pytest.approx(rate.cumulative_bytes, rel=0.006)
            assert parsed["pair_rates_bps"][pair] == pytest.approx(rate.rates_bps, rel=0.006)
        assert parsed["pairs"][f"{B}>{C}"] == 0
        sent = samples[-1][1][f"{B}>{A}"]
        received = samples[-1][1][f"{A}>{B}"] + samples[-1][1][f"{C}>{B}"]
        assert parsed["sent_bytes"] == pytest.approx(sent, rel=0.006)
        assert parsed["received_bytes"] == pytest.approx(received, rel=0.006)
        assert parsed["total_bytes"] == pytest.approx(sent + received, rel=0.006)
        assert parsed["send_rate_bps"][1] == pytest.approx(9_000 * 8, rel=0.006)
        assert parsed["receive_rate_bps"][1] == pytest.approx(301_000 * 8, rel=0.006)
        assert parsed["peak_bps"][1] == pytest.approx(301_000 * 8, rel=0.006)
        assert parsed["peak_bps"][2] == pytest.approx(310_000 * 8, rel=0.006)


def test_orientation_local_ip_versus_lexical():
    samples = _samples(10, {f"{B}>{A}": lambda t: 1000.0})
    from_b = parse_iftop_output(format_iftop_table(samples, "v", local_ip=B))
    assert from_b["sent_bytes"] == pytest.approx(10_000, rel=0.006)
    assert from_b["received_bytes"] == 0
    from_a = parse_iftop_output(format_iftop_table(samples, "v", local_ip=A))
    assert from_a["received_bytes"] == pytest.approx(10_000, rel=0.006)
    assert from_a["sent_bytes"] == 0
    lexical = format_iftop_table(samples, "v").splitlines()
    (first,) = [line for line in lexical if "=>" in line]
    assert first.split()[1] == A  # "10.99.0.1" < "10.99.0.2": left column
    assert parse_iftop_output("\n".join(lexical))["received_bytes"] == pytest.approx(10_000, rel=0.006)


def test_format_sorts_by_10s_column_and_limits_lines():
    samples = _samples(20, {
        f"{A}>{B}": lambda t: 100.0,
        f"{C}>{B}": lambda t: 5000.0,
    })
    lines = format_iftop_table(samples, "v", local_ip=B, max_lines=1).splitlines()
    pair_lines = [line for line in lines if "=>" in line or "<=" in line]
    assert len(pair_lines) == 2
    assert pair_lines[1].split()[0] == C
    # totals still cover every pair, as in iftop
    parsed = parse_iftop_output("\n".join(lines))
    assert parsed["received_bytes"] == pytest.approx(20 * 5100, rel=0.006)


def test_format_empty_samples():
    parsed = parse_iftop_output(format_iftop_table([], "v"))
    assert parsed["total_bytes"] == 0 and parsed["pairs"] == {}


# --------------------------------------------------------------------------- files and argv

def test_load_samples_skips_blank_and_torn_lines(tmp_path):
    path = tmp_path / "m.jsonl"
    lines = [json.dumps({"t": 1.0, "pairs": {}}),
             "",
             json.dumps({"t": 2.0, "pairs": {f"{A}>{B}": 100}}),
             '{"t": 3.0, "pairs": {"10.99']
    path.write_text("\n".join(lines))
    assert load_samples(str(path)) == [(1.0, {}), (2.0, {f"{A}>{B}": 100})]


def test_iftop_argv_builder():
    argv = run_iftop_command("veth1", 5)
    assert argv[0] == "iftop"
    for flag in ("-t", "-n", "-N"):
        assert flag in argv
    assert argv[argv.index("-s") + 1] == "5"
    assert argv[argv.index("-i") + 1] == "veth1"
    assert "-P" not in argv and "-B" not in argv
    assert "-B" in run_iftop_command("veth1", 5, rate_unit="bytes")
    with pytest.raises(ValueError):
        run_iftop_command("veth1", 0)
    assert IFTOP_WINDOWS_S == (2.0, 10.0, 40.0)
