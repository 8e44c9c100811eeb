"""Goldmane: the flow aggregator behind Whisker (see design/goldmane.md)."""
