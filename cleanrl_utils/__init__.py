"""Tooling around the single-file scripts in `cleanrl/`: reports from local runs, and more to come."""
