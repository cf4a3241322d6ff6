"""Reading and checking a flowgen config (the package docstring documents its fields): the role, the fields
each role requires, and the type and range of every field; a bad one raises ValueError naming the file
and the field."""
from __future__ import annotations

import ipaddress
import json
import math

from testbed.traffic.flowgen.tcp import congestion_control_error
from testbed.traffic.flowgen.udp import UDP_HEADER, UDP_MAX_DATAGRAM_BYTES

ROLES = ("sink", "source", "udp-sink", "udp-source")
REQUIRED_FIELDS = {
    "sink": ("port",),
    "source": ("start_epoch_s", "stop_epoch_s", "output", "flows"),
    "udp-sink": ("port", "output"),
    "udp-source": ("start_epoch_s", "stop_epoch_s", "output", "flows"),
}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_port(value: object) -> bool:
    return _is_int(value) and 0 < value < 65536


def _is_ipv4(value: object) -> bool:
    try:
        ipaddress.IPv4Address(value)
    except (TypeError, ValueError):
        return False
    return True


def _check_field(path: str, where: str, field: str, container: dict, ok, requirement: str) -> None:
    """ValueError naming the file and ``where.field`` unless ``ok(container[field])``."""
    if field in container and ok(container[field]):
        return
    got = repr(container[field]) if field in container else "nothing"
    raise ValueError(f"{path}: {where}{field} must be {requirement} (got {got})")


def _check_udp_config(path: str, config: dict) -> None:
    if config["role"] == "udp-sink":
        _check_field(path, "", "port", config, _is_port, "an integer port 1-65535")
        if "listen_ip" in config:
            _check_field(path, "", "listen_ip", config, _is_ipv4, "an IPv4 address")
        if "stop_epoch_s" in config:
            _check_field(path, "", "stop_epoch_s", config, _is_number, "a number (seconds since the epoch)")
        _check_field(path, "", "output", config, lambda v: isinstance(v, str) and v != "", "a file path")
        return
    for field in ("start_epoch_s", "stop_epoch_s"):
        _check_field(path, "", field, config, _is_number, "a number (seconds since the epoch)")
    _check_field(path, "", "output", config, lambda v: isinstance(v, str) and v != "", "a file path")
    _check_field(path, "", "flows", config, lambda v: isinstance(v, list), "a list of flows")
    for i, flow in enumerate(config["flows"]):
        where = f"flows[{i}]."
        if not isinstance(flow, dict):
            raise ValueError(f"{path}: flows[{i}] must be an object (got {flow!r})")
        _check_field(path, where, "dst", flow, _is_ipv4, "an IPv4 address")
        _check_field(path, where, "port", flow, _is_port, "an integer port 1-65535")
        _check_field(path, where, "start_s", flow, lambda v: _is_number(v) and v >= 0, "a number >= 0")
        _check_field(path, where, "duration_s", flow, lambda v: _is_number(v) and v > 0, "a number > 0")
        _check_field(path, where, "rate_bps", flow, lambda v: _is_number(v) and v > 0, "a number > 0")
        if "datagram_bytes" in flow:
            _check_field(path, where, "datagram_bytes", flow,
                         lambda v: _is_int(v) and UDP_HEADER.size <= v <= UDP_MAX_DATAGRAM_BYTES,
                         f"an integer from {UDP_HEADER.size} to {UDP_MAX_DATAGRAM_BYTES}")


def load_config(path: str) -> dict:
    """Read and check a flowgen config; ValueError names the file and the bad field."""
    with open(path) as f:
        config = json.load(f)
    if not isinstance(config, dict) or config.get("role") not in ROLES:
        raise ValueError(f"{path}: 'role' must be one of {', '.join(repr(r) for r in ROLES)}")
    missing = [k for k in REQUIRED_FIELDS[config["role"]] if k not in config]
    if missing:
        raise ValueError(f"{path}: {config['role']} config lacks {', '.join(missing)}")
    if config["role"].startswith("udp-"):
        _check_udp_config(path, config)
        return config
    if "congestion_control" in config and not (isinstance(config["congestion_control"], str)
                                               and config["congestion_control"]):
        raise ValueError(f"{path}: congestion_control must be a TCP congestion control's name, e.g. 'cubic'")
    if config.get("congestion_control") and (why := congestion_control_error(config["congestion_control"])):
        raise ValueError(f"{path}: congestion_control: {why}")
    for i, flow in enumerate(config.get("flows", [])):
        try:
            ipaddress.IPv4Address(flow["dst"])
            if int(flow["port"]) <= 0 or float(flow["start_s"]) < 0 or int(flow["size_bytes"]) < 0:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"{path}: flows[{i}] needs dst (IPv4), port > 0, start_s >= 0, size_bytes >= 0: {flow}"
            ) from None
    return config
