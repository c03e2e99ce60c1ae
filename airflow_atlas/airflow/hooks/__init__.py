"""Hooks: :class:`~.atlas.AtlasHook` (the store) and the nodetool runners (:mod:`.nodetool`)."""
from airflow_atlas.airflow.hooks.atlas import AtlasHook

__all__ = ["AtlasHook"]
