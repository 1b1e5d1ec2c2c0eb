"""The supervised training benchmark: config, worker supervision, batch-size search."""
