"""Benchmark foreground_impact: how much a sweep slows the application it cleans (:mod:`.run`, the method), the
application's transactions (:mod:`.foreground`), the sweep process (:mod:`.sweeper`), the statistics and goals
(:mod:`.summary`) and the RESULTS.md section and chart (:mod:`.report`)."""
