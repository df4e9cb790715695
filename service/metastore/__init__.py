"""Metadata Store: OpenLineage events into PostgreSQL."""

__version__ = "0.1.0"
