"""The pyswitch control socket answers every malformed request with an error reply and keeps serving.

``handle_request`` is driven directly (no Mininet, no root); one test runs a
real SwitchProcess without ports on a Unix socket in a temporary directory.
"""

import json
import socket
import threading

import pytest

from testbed.dataplane.pyswitch.core import PySwitchCore
from testbed.dataplane.pyswitch.process import (MAX_ERROR_CHARS, MAX_REQUEST_BYTES, SwitchProcess, SwitchSpec,
                                                VERB_ARGUMENTS, handle_request)
from testbed.metrics.host_delay import HostDelayMeter

MALFORMED = [
    b"[]", b"null", b"42", b'"ping"', b"true", b"", b"   ", b"{", b"}", b"\xff\xfe\x00", b"[" * 50_000,
    b"{\"a\":" * 50_000, b'{"op": "ping"' + b"]" * 10, b'{"op": null}', b'{"op": ["ping"]}', b'{"op": 7}',
    b'{"no_op": 1}', b'{"op": "nope"}', b'{"op": "__init__"}', b'{"op": "ping", "x": 1}',
    b'{"op": "table_add", "table": 5, "action": [], "match": 7, "params": null}',
    b'{"op": "table_add", "table": "ipv4_lpm", "action": "ipv4_forward", "match": [[1]], "params": [1, 2]}',
    b'{"op": "table_clear", "table": "nope"}',
    b'{"op": "register_read", "name": {}, "index": "a"}',
    b'{"op": "register_read", "name": "agg_count", "index": 99999999999999999999999}',
    b'{"op": "register_write", "name": "agg_count", "index": 0, "value": 1e400}',
    b'{"op": "register_write", "name": "agg_count", "index": 0, "value": -5}',
    b'{"op": "counter_read", "name": "port_ina_tx", "index": true}',
    b'{"op": "mc_group_create", "group_id": -1, "ports": "abc"}',
    b'{"op": "meter_set_rates", "name": "agg_capacity", "index": 0, "rate_per_s": -1, "burst": "z"}',
    b'{"op": "set_port_shaping", "port": 1, "rate_bps": NaN, "depth_pkts": 3}',
    b'{"op": "set_port_shaping", "port": 1, "rate_bps": Infinity, "depth_pkts": 3}',
    b'{"op": "set_port_shaping", "port": 1, "rate_bps": 1e999, "depth_pkts": 3}',
    b'{"op": "set_port_shaping", "port": "x", "rate_bps": "y", "depth_pkts": []}',
    b'{"op": "set_port_impairment", "port": 1, "drop": 2, "duplicate": 0, "reorder": 0, "seed": 1}',
    b'{"op": "set_port_impairment", "port": 1, "drop": "a", "duplicate": null, "reorder": [], "seed": 1.5}',
    b"x" * (MAX_REQUEST_BYTES + 1),
]


@pytest.fixture
def core():
    return PySwitchCore("s1", 64, 16)


def assert_error_reply(reply):
    assert reply["ok"] is False
    assert isinstance(reply["error"], str) and reply["error"]
    assert len(reply["error"]) <= MAX_ERROR_CHARS and "\n" not in reply["error"]
    json.dumps(reply)   # always encodable


@pytest.mark.parametrize("line", MALFORMED, ids=lambda line: repr(line[:40]))
def test_malformed_request_gets_an_error_reply_and_the_switch_still_works(core, line):
    assert_error_reply(handle_request(core, line))
    assert handle_request(core, b'{"op": "ping"}') == {"ok": True, "result": {"switch": "s1", "lanes": 64,
                                                                              "slots": 16}}


def test_every_verb_of_the_core_has_an_argument_schema(core):
    verbs = {name[len("_op_"):] for name in dir(core) if name.startswith("_op_")}
    assert verbs == set(VERB_ARGUMENTS)


def test_wrong_argument_types_name_the_argument(core):
    reply = handle_request(core, b'{"op": "set_port_shaping", "port": 1, "rate_bps": "fast", "depth_pkts": 3}')
    assert_error_reply(reply)
    assert "rate_bps must be a finite number" in reply["error"]
    reply = handle_request(core, b'{"op": "register_read", "name": "agg_count"}')
    assert "missing index" in reply["error"]


def test_valid_requests_still_work_after_malformed_ones(core):
    for line in MALFORMED:
        handle_request(core, line)
    shaping = {"op": "set_port_shaping", "port": 1, "rate_bps": 1e6, "depth_pkts": 8}
    assert handle_request(core, json.dumps(shaping).encode()) == {"ok": True, "result": None}
    write = {"op": "register_write", "name": "agg_count", "index": 3, "value": 2}
    assert handle_request(core, json.dumps(write).encode())["ok"]
    read = handle_request(core, b'{"op": "register_read", "name": "agg_count", "index": 3}')
    assert read == {"ok": True, "result": 2}


def _ask(stream, line: bytes) -> dict:
    stream.write(line + b"\n")
    stream.flush()
    return json.loads(stream.readline())


def test_a_real_control_socket_survives_malformed_requests(tmp_path):
    path = str(tmp_path / "s1.sock")
    proc = SwitchProcess([SwitchSpec("s1", {}, path)], lanes=64, slots=16)
    server = threading.Thread(target=proc.serve, daemon=True)
    server.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(10)
            client.connect(path)
            stream = client.makefile("rwb")
            for line in MALFORMED:
                if b"\n" in line:
                    continue
                assert_error_reply(_ask(stream, line))
            assert _ask(stream, b'{"op": "ping"}')["ok"] is True
            # A line far over the limit is answered once (when it passes the limit), then skipped.
            assert_error_reply(_ask(stream, b"y" * (3 * MAX_REQUEST_BYTES)))
            assert _ask(stream, b'{"op": "ping"}')["ok"] is True
        # A second client after the first left: the listener is still there.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(10)
            client.connect(path)
            assert _ask(client.makefile("rwb"), b'{"op": "stats"}')["ok"] is True
        assert server.is_alive()
    finally:
        proc.running = False
        server.join(timeout=5)
        proc.close()


def test_the_process_answers_host_delay_itself_and_a_bare_core_refuses_it(core):
    meter = HostDelayMeter()
    meter.received(10.0, 10.002)
    reply = handle_request(core, b'{"op": "host_delay"}', {"host_delay": meter.summary})
    assert reply["ok"] and reply["result"]["receive_wait"]["count"] == 1
    assert_error_reply(handle_request(core, b'{"op": "host_delay"}'))
    extra = handle_request(core, b'{"op": "host_delay", "x": 1}', {"host_delay": meter.summary})
    assert "unexpected x" in extra["error"]
