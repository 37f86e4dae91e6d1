"""Startup and serving logs turned into typed facts (facts.py). One parser per engine (engines/<engine>/log.py),
fed by a streaming, tolerant line reader (reader.py). Parsers never compute capacity: explain does, with the
same engine model as check."""
