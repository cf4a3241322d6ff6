"""The cache keeps the most recently used builds of each kind and nothing it did not make (testbed.cache,
its use in testbed.bpf_build and testbed.dataplane.p4build)."""

import os
import shutil
from pathlib import Path

import pytest

from support import IN_CI
from testbed import bpf_build, cache
from testbed.dataplane import p4build

REPO = Path(__file__).resolve().parents[2]


def _entry(path: Path, age_s: float, directory: bool = False) -> Path:
    """A cache entry last used ``age_s`` before a fixed moment."""
    path.mkdir() if directory else path.write_bytes(b"")
    when = 1_000_000_000 - age_s
    os.utime(path, (when, when))
    return path


def test_prune_keeps_the_most_recently_used_and_removes_files_and_directories(tmp_path):
    entries = [_entry(tmp_path / f"e{i}", age_s=100 * i, directory=i % 2 == 1) for i in range(5)]  # e0 newest
    cache.mark_used(entries[4])                               # used now: the newest of all
    removed = cache.prune(entries + [tmp_path / "gone"], keep=2)
    assert sorted(p.name for p in removed) == ["e1", "e2", "e3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e0", "e4"]


def test_prune_keeps_everything_within_its_count(tmp_path):
    entries = [_entry(tmp_path / f"f{i}", age_s=i) for i in range(3)]
    assert cache.prune(entries, keep=3) == [] and len(list(tmp_path.iterdir())) == 3


def test_a_bpf_build_prunes_its_own_stale_objects_and_nothing_else(tmp_path, monkeypatch):
    if why := bpf_build.missing_prerequisite():
        (pytest.fail if IN_CI else pytest.skip)(f"BPF builds: {why}")
    monkeypatch.setattr(cache.prune, "__defaults__", (2,))
    source = tmp_path / "tiny.bpf.c"
    source.write_text('#include "vmlinux.h"\nchar LICENSE[] __attribute__((section("license"), used)) = "GPL";\n')
    store = tmp_path / "store"
    store.mkdir()
    stale = [_entry(store / f"tiny-{i:016x}.bpf.o", age_s=1000 + i) for i in range(3)]     # stale[0] newest
    foreign = [_entry(store / name, age_s=5000) for name in ("tiny-notes.txt", "other-0000000000000000.bpf.o")]
    built = bpf_build.build(source, "tiny", cache=store)
    assert sorted(p.name for p in store.glob("tiny-*.bpf.o")) == sorted([built.name, stale[0].name])
    assert all(p.exists() for p in foreign)
    assert bpf_build.build(source, "tiny", cache=store) == built


def test_the_p4_cache_prunes_only_directories_named_by_its_keys(tmp_path, monkeypatch):
    """compile_program's pruning, with a stand-in p4c that writes an empty program: of the older key
    directories the newest stays beside the new build; a directory of another name stays."""
    monkeypatch.setattr(cache.prune, "__defaults__", (2,))
    p4c = tmp_path / "p4c"
    p4c.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "p4c 0.0 (stand-in)"; exit 0; }\n'
                   'for a; do [ "$prev" = -o ] && out=$a; prev=$a; done\necho "{}" > "$out/ina.json"\n')
    p4c.chmod(0o755)
    store = tmp_path / "p4"
    store.mkdir()
    old = [_entry(store / f"{i:064x}", age_s=100 * (3 - i), directory=True) for i in range(3)]  # old[2] newest
    other = _entry(store / "notes", age_s=9999, directory=True)
    shutil.copytree(REPO / "p4", tmp_path / "src")
    built = p4build.compile_program(p4c=str(p4c), cache_dir=store, source=tmp_path / "src" / "ina.p4")
    assert built.is_file() and other.is_dir()
    assert sorted(d.name for d in store.iterdir() if d != other) == sorted([built.parent.name, old[2].name])
