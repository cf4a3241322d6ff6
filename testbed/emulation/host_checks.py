"""What this host must have before a run builds anything: root and the tools Mininet drives
(:func:`preflight`), and the kernel's TCP congestion controls the background asks for, or their BPF
substitutes (:func:`check_host_supports`)."""

import os
import shutil

from testbed.errors import EnvironmentMissingError
from testbed.traffic import dctcp_bpf
from testbed.traffic.flowgen import congestion_control_error


def preflight():
    if os.geteuid() != 0:
        raise EnvironmentMissingError("inatb run needs root: Mininet creates network namespaces and links "
                                      "(run it with sudo)")
    for binary, package in (("mnexec", "mininet"), ("tc", "iproute2"), ("ethtool", "ethtool")):
        if shutil.which(binary) is None:
            raise EnvironmentMissingError(f"{binary} not found; install the Debian package {package} "
                                          f"(the README's set-up command does)")


def check_host_supports(scenario) -> dict:
    """Refuse, before any network exists, what this host's kernel cannot run: a background entry's TCP
    congestion control it does not have, unless the run can provide it (DCTCP as BPF, built here:
    testbed.traffic.dctcp_bpf). Returns {name: dctcp_bpf.Substitute} of those the run provides."""
    substitutes = {}
    for index, spec in enumerate(scenario.background):
        name = spec.congestion_control
        if not name or name in substitutes:
            continue
        try:
            substitute = dctcp_bpf.prepare(name)
        except dctcp_bpf.BpfDctcpError as exc:
            raise EnvironmentMissingError(f"background.{index}.congestion_control: {exc}") from None
        if substitute is not None:
            substitutes[name] = substitute
        elif why := congestion_control_error(name):
            raise EnvironmentMissingError(f"background.{index}.congestion_control: {why}")
    return substitutes
