"""Capacity under the SLOs: search the highest load level that meets them (search.py), stopping
over-saturated trials early (saturation.py). See harness.capacity.search for the Python API."""
