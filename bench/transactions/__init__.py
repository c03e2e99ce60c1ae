"""Benchmark transactions: transactions of 4 reads + 1 write, timestamps from the server vs the cell, beside raw
CQL (:mod:`.run`; also ``python -m bench.transactions``)."""
