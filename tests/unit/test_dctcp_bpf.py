"""The BPF builds' and the BPF DCTCP's commands, pure parts (testbed.bpf_build, testbed.traffic.dctcp_bpf); the
build, the registration and the cleanup themselves run in test_conditions.py, test_state_safety.py, the
emulation's test_dynamics.py and the ebpf target's packet tests."""

import sys
from pathlib import Path

import pytest

from testbed import bpf_build
from testbed.traffic import dctcp_bpf


def test_the_object_is_cached_per_kernel_release_and_source():
    cache = Path("/c")
    one = bpf_build.object_path(cache, "dctcp", "6.1.0", b"source")
    assert one == bpf_build.object_path(cache, "dctcp", "6.1.0", b"source") and one.parent == cache
    assert one != bpf_build.object_path(cache, "dctcp", "6.18.0", b"source")
    assert one != bpf_build.object_path(cache, "dctcp", "6.1.0", b"source, edited")
    assert one != bpf_build.object_path(cache, "dctcp", "6.1.0", b"source", ("INA_LANES=32",))


def test_commands_are_built_apart_from_running_them():
    assert bpf_build.vmlinux_header_argv() == ["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux",
                                              "format", "c"]
    argv = bpf_build.compile_argv(Path("d.bpf.c"), Path("d.o"), Path("inc"), ("INA_LANES=32",))
    assert argv[:5] == ["clang", "-O2", "-g", "-target", "bpf"] and argv[-4:] == ["-c", "d.bpf.c", "-o", "d.o"]
    assert "-DINA_LANES=32" in argv
    assert dctcp_bpf.register_argv(Path("d.o")) == ["bpftool", "struct_ops", "register", "d.o"]
    assert dctcp_bpf.unregister_argv() == ["bpftool", "struct_ops", "unregister", "name", "inatb_dctcp"]


def test_a_failing_step_says_its_first_error_in_one_line():
    script = "import sys; print('warning: x', file=sys.stderr); print('f.c:3: error: no such type', " \
             "file=sys.stderr); print('1 error generated.', file=sys.stderr); sys.exit(1)"
    with pytest.raises(dctcp_bpf.BpfDctcpError, match=r"^compiling failed: f\.c:3: error: no such type$"):
        dctcp_bpf._run([sys.executable, "-c", script], "compiling")


def test_other_congestion_controls_and_a_kernels_own_dctcp_need_nothing(monkeypatch):
    assert dctcp_bpf.prepare("cubic") is None
    monkeypatch.setattr(dctcp_bpf, "available", lambda: ["reno", "cubic", "dctcp"])
    assert dctcp_bpf.prepare("dctcp") is None
