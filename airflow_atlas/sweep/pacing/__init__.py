"""Pace control of a sweep run: the pacer that holds a rate (:mod:`.intensity`), the application pace that
chooses it from the application's publications (:mod:`.application`) with the node-pressure guard
(:mod:`.pressure`), and one run's composition of them (:mod:`.run_pace`). Imports nothing of ``sweep``; the
sweepers import it."""
