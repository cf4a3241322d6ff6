"""Data plane: the INA wire codec, the switch runtime interface, and the pyswitch model of p4/ina.p4."""
