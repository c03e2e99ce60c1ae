"""The forms (Params) of the UI-triggered DAGs and their validation against the store.

Airflow validates each Param's JSON schema when a run is created (type, range, enum), but accepts keys
that no Param declares, and cannot know the store's shard count or tables. The validation task of each
DAG (:class:`ValidateSweepRequestOperator`, the first task, before anything is written) checks exactly
that and fails with one message listing every problem.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import Param

from airflow_atlas.airflow.operators.base import AtlasBaseOperator
from airflow_atlas.airflow.settings import MAX_FULL_SWEEP_PARTS, AtlasSettings
from airflow_atlas.config import MAX_ITERATIONS_PER_SHARD, MAX_SWEEP_ENTRIES_PER_SECOND, check_setting
from airflow_atlas.errors import InvalidInputError
from airflow_atlas.kvs.tables import SWEEPABLE_STRATEGY_NAMES, SweepStrategy
from airflow_atlas.sweep.queue.constants import MAX_SHARDS

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_atlas.store import AtlasStore
from airflow_atlas.validation import check_int

FORM_RATE = "the form's max_entries_per_second"
"""How errors name the manual sweep form's intensity (a settings layer of the run's sweep tasks)."""


def _optional_int(minimum: int, maximum: int, title: str, description: str) -> Param:
    """A form field for an integer in ``minimum..maximum`` that may be left empty (then a setting applies)."""
    return Param(None, type=["null", "integer"], minimum=minimum, maximum=maximum, title=title, description=description)


def manual_sweep_params() -> dict[str, Param]:
    return {
        "tables": Param(
            [],
            type="array",
            items={"type": "string"},
            title="Tables",
            description="Tables whose strategies to sweep (empty: all). The sweep queue is per shard and strategy, so "
            "the chosen shards are swept for every table that shares the strategy.",
        ),
        "shards": Param(
            [],
            type="array",
            items={"type": "integer", "minimum": 0, "maximum": MAX_SHARDS - 1},
            title="Shards",
            description="Shards to sweep (empty: all shards of the store).",
        ),
        "strategy": Param(
            "ALL",
            type="string",
            enum=["ALL", *SWEEPABLE_STRATEGY_NAMES],
            title="Strategy",
            description="Sweep strategy to sweep (ALL: both, or those of the chosen tables).",
        ),
        "dry_run": Param(False, type="boolean", title="Dry run", description="Read and report only; write nothing."),
        "max_batches": _optional_int(
            1, MAX_ITERATIONS_PER_SHARD, "Maximum batches",
            "Iterations (batches of batch_limit queue entries) per shard and strategy (empty: setting max_iterations_per_shard).",
        ),
        "max_entries_per_second": _optional_int(
            0, MAX_SWEEP_ENTRIES_PER_SECOND, "Maximum entries per second",
            "Intensity: sweep-queue entries each sweep task takes per second at most, per pair, a fixed rate for "
            "this run (the application pace is off for it; 0: unlimited; empty: the settings' pace). The total is "
            "this times the sweep tasks running at once (see docs/INTENSITY.md).",
        ),
    }


def full_sweep_params() -> dict[str, Param]:
    return {
        "tables": Param(
            [], type="array", items={"type": "string"}, title="Tables", description="Tables to sweep (empty: every swept table)."
        ),
        "parts": _optional_int(1, MAX_FULL_SWEEP_PARTS, "Parts", "Scan ranges per table (empty: setting full_sweep_parts)."),
        "dry_run": Param(False, type="boolean", title="Dry run", description="Report only; delete nothing."),
    }


def _is_int_in(value: object, lo: int, hi: int) -> bool:
    """True for an integer (not a bool) in ``lo..hi``."""
    try:
        check_int(value, "value", lo, hi)
    except InvalidInputError:
        return False
    return True


def _unknown_keys(conf: Mapping, allowed: Mapping) -> list[str]:
    unknown = sorted(set(conf or {}) - set(allowed))
    if not unknown:
        return []
    return [f"unknown parameter(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(sorted(allowed))}"]


def _tables(tables: list | None, user_tables: Mapping[str, SweepStrategy], problems: list[str]) -> list[str]:
    tables = list(dict.fromkeys(tables or []))
    unknown = [t for t in tables if t not in user_tables]
    if unknown:
        problems.append(
            f"unknown table(s) {', '.join(map(repr, unknown))}; the store has: {', '.join(sorted(user_tables)) or 'no tables'}"
        )
    never = [t for t in tables if t in user_tables and not user_tables[t].is_swept]
    if never:
        problems.append(f"table(s) {', '.join(map(repr, never))} have sweep strategy NOTHING and are never swept")
    return tables


def validate_manual_sweep(
    conf: Mapping, params: Mapping, *, number_of_shards: int, user_tables: Mapping[str, SweepStrategy]
) -> dict:
    """The sweep request of a manual run, or InvalidInputError listing every problem.

    ``conf`` is the run's raw configuration (to find unknown keys), ``params`` the resolved Params.
    Returns ``{"shards": [...], "strategies": [...], "tables": [...], "dry_run": bool, "max_batches": int|None,
    "max_entries_per_second": int|None, "store_config": {...}}`` with shards and strategies spelled out;
    ``store_config`` is the form's intensity as a settings layer of the sweep tasks - a fixed rate
    (``{"sweep_max_entries_per_second": N, "sweep_latency_target": 0}``), or ``{}``: the settings apply.
    """
    allowed = manual_sweep_params()
    problems = _unknown_keys(conf, allowed)
    shards = list(dict.fromkeys(params.get("shards") or []))
    bad = [s for s in shards if not _is_int_in(s, 0, number_of_shards - 1)]
    if bad:
        problems.append(f"shard(s) {bad} out of range: the store has {number_of_shards} shard(s) (0..{number_of_shards - 1})")
    tables = _tables(params.get("tables"), user_tables, problems)
    strategy = str(params.get("strategy") or "ALL").upper()
    if strategy != "ALL" and strategy not in SWEEPABLE_STRATEGY_NAMES:
        problems.append(f"unknown strategy {strategy!r}: use ALL, CONSERVATIVE or THOROUGH")
    strategies = list(SWEEPABLE_STRATEGY_NAMES) if strategy == "ALL" else [strategy]
    if tables and not problems:
        of_tables = {user_tables[t].value for t in tables}
        mismatched = [t for t in tables if user_tables[t].value not in strategies]
        if mismatched:
            problems.append(
                f"table(s) {', '.join(f'{t!r} ({user_tables[t].value})' for t in mismatched)} do not use strategy {strategy}"
            )
        strategies = [s for s in strategies if s in of_tables]
    max_batches = params.get("max_batches")
    if max_batches is not None and not _is_int_in(max_batches, 1, MAX_ITERATIONS_PER_SHARD):
        problems.append(f"max_batches must be an integer in 1..{MAX_ITERATIONS_PER_SHARD} or empty, got {max_batches!r}")
    rate = params.get("max_entries_per_second")
    store_config: dict[str, Any] = {}
    if rate is not None:  # a layer of the run's sweep tasks' settings, checked by the setting's declaration
        try:
            store_config = {"sweep_max_entries_per_second": check_setting("sweep_max_entries_per_second", rate, FORM_RATE),
                            "sweep_latency_target": 0.0}  # "at most": a fixed rate, not the application pace's safe pace
        except InvalidInputError as exc:
            problems.append(str(exc))
    dry_run = params.get("dry_run", False)
    if not isinstance(dry_run, bool):
        problems.append(f"dry_run must be true or false, got {dry_run!r}")
    if problems:
        raise InvalidInputError("invalid sweep request: " + "; ".join(problems))
    return {
        "shards": shards or list(range(number_of_shards)),
        "strategies": strategies,
        "tables": tables,
        "dry_run": dry_run,
        "max_batches": max_batches,
        "max_entries_per_second": rate,
        "store_config": store_config,
    }


def validate_full_sweep(conf: Mapping, params: Mapping, *, user_tables: Mapping[str, SweepStrategy]) -> dict:
    """The request of a full-sweep run, or InvalidInputError listing every problem."""
    problems = _unknown_keys(conf, full_sweep_params())
    tables = _tables(params.get("tables"), user_tables, problems)
    parts = params.get("parts")
    if parts is not None and not _is_int_in(parts, 1, MAX_FULL_SWEEP_PARTS):
        problems.append(f"parts must be an integer in 1..{MAX_FULL_SWEEP_PARTS} or empty, got {parts!r}")
    dry_run = params.get("dry_run", False)
    if not isinstance(dry_run, bool):
        problems.append(f"dry_run must be true or false, got {dry_run!r}")
    if problems:
        raise InvalidInputError("invalid full sweep request: " + "; ".join(problems))
    if not tables:
        tables = sorted(t for t, s in user_tables.items() if s.is_swept)
    return {"tables": tables, "parts": parts, "dry_run": dry_run}


class ValidateSweepRequestOperator(AtlasBaseOperator):
    """First task of a UI-triggered sweep DAG: checks the run's Params against the store (read only) and
    fails without retries, naming every problem, before anything is written.

    :param request: ``"targeted"`` (form of :func:`manual_sweep_params`) or ``"full"``
        (:func:`full_sweep_params`).
    :param store_conn_id: see :class:`~airflow_atlas.airflow.operators.base.AtlasBaseOperator`.

    Returns the validated request and also pushes each of its keys as its own XCom, so later tasks can
    take ``validate.output["shards"]`` (unset numbers are pushed as 0: "use the setting"). The intensity
    travels as a settings layer, ``validate.output["store_config"]`` (the sweep tasks' ``store_config``:
    ``{}`` when the form leaves it empty, so the tasks read the setting themselves).
    """

    def __init__(self, *, request: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if request not in ("targeted", "full"):
            raise ValueError("request must be 'targeted' or 'full'")
        self.request = request

    def execute_with_store(self, context: Context, store: AtlasStore, settings: AtlasSettings) -> Any:
        conf = dict(getattr(context.get("dag_run"), "conf", None) or {})
        params = dict(context["params"])
        if self.request == "targeted":
            out = validate_manual_sweep(conf, params, number_of_shards=store.number_of_shards(), user_tables=store.user_tables())
        else:
            out = validate_full_sweep(conf, params, user_tables=store.user_tables())
        for key, value in out.items():
            # An XCom of None reads as missing downstream: push 0 for "unset" (max_batches, parts), which
            # the operators read as "use the setting".
            context["ti"].xcom_push(key=key, value=0 if value is None else value)
        self.log.info("request: %s", out)
        return out
