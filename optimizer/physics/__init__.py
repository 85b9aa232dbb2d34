"""Physics: pure functions for memory per GPU, step time and cost, each citing its source."""
