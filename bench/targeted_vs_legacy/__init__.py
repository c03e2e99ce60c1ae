"""Benchmark targeted_vs_legacy: targeted sweep vs legacy (scan-based) sweep (:mod:`.run`)."""
