"""INA Testbed: emulate in-network aggregation schemes for distributed training.

Data flow of one run (docs/design/architecture.md):
scenario -> topology -> placement -> controller -> emulation -> metrics -> results/.
"""

__version__ = "0.1.0"
