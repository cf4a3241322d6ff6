"""Run metrics: traffic meters and the tables and series the papers report."""
