"""Scrub: physically remove hard-deleted data (spec 003) once no open transaction can still read it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.reports import swept_tables
from airflow_atlas.airflow.results import ScrubReport
from airflow_atlas.airflow.settings import AtlasSettings
from airflow_atlas.airflow.xcom import to_xcom

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_atlas.store import AtlasStore


class ScrubOperator(AtlasBaseOperator):
    """Process the scrub queue: entries below the immutable timestamp are swept (ranged tombstones) and
    removed from the queue; newer ones wait for a later run.

    :param max_entries: at most this many ready entries per run (templated); default setting
        ``scrub_max_entries`` (``null`` = all ready entries).
    :param dry_run: decide, delete nothing (templated).
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.

    Returns :class:`~airflow_atlas.airflow.results.ScrubReport` JSON: the engine's ``ScrubResult`` (entries
    seen/scrubbed/waiting, cells tombstoned, aborted writes deleted, per-table counts) with ``dry_run`` and
    ``swept_tables``.

    (The ``dry_run`` argument is kept as ``scrub_dry_run``: ``dry_run`` is a method of ``BaseOperator``.)
    """

    template_fields = (*AtlasBaseOperator.template_fields, "max_entries", "scrub_dry_run")

    def __init__(self, *, max_entries: int | None = None, dry_run: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_entries = max_entries
        self.scrub_dry_run = dry_run

    def execute_with_store(self, context: Context, store: AtlasStore, settings: AtlasSettings) -> Any:
        limit = self.max_entries if self.max_entries is not None else settings.scrub_max_entries
        dry_run = self.scrub_dry_run is True
        result = store.scrubber.scrub(max_entries=limit or None, dry_run=dry_run)
        report = ScrubReport(result, dry_run, [] if dry_run else swept_tables(cells=result.tables))
        self.log.info("scrub: %s", report)
        return to_xcom(report)
