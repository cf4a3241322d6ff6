"""INA Testbed: emulate in-network aggregation schemes for distributed training.

Data flow of one run (see the README's "How it works"):
scenario -> topology -> policy -> controller -> emulation -> metrics -> results/.
"""

__version__ = "0.1.0"
