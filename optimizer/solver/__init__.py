"""Solver layer: the CP-SAT model builder, single-job planning with its frontier, and portfolios."""
