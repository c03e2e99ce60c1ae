"""The takeover drill of the timestamp servers, many times over, with the takeover times' distribution
(:mod:`.run`; ``python -m bench.takeover_drill``, not part of ``bench.run``)."""
