"""Reliability tests (issue 18): a real subprocess server, real faults, real load."""
