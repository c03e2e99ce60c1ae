"""Pace control of a sweep run: the pacer that holds a rate (:mod:`.intensity`), the adaptive pace that
chooses it (:mod:`.adaptive`), the application pace that bounds it by the application's latency
(:mod:`.application`) and the store's pace profile (:mod:`.pace_profile`). Imports nothing of
``sweep`` but :mod:`airflow_atlas.sweep.history` (the table the profile is kept in); the sweepers import it."""
