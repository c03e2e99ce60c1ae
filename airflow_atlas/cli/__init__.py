"""``atlas-sweep``: operate an Atlas store from a shell (docs/CLI.md).

Subcommands: ``init``, ``workload``, ``status``, ``metrics``, ``sweep``, ``verify``, ``shards``, ``grants``, ``timestamps``, and
``certs``, the one that needs no store (``atlas-sweep COMMAND --help`` for each), one module each; :mod:`.output` holds what they share (exit codes, JSON, tables, the
progress bar), :mod:`.args` the parser, :mod:`.store` the opening of the store (nothing is written unless
the command is ``init``). The store is chosen by ``--store URL``, by ``--conn-id ID`` (an Airflow
connection; Airflow is imported only then) or by ``$ATLAS_STORE_URL``.

Exit codes (stable, for scripts): 0 success; 1 verification failed, a sweep of a pair failed, or an
unexpected error; 2 usage or bad input (option, value, path, URL, store not initialized, lowering
shards); 3 store unavailable; 4 ``sweep`` skipped pairs locked by another sweeper (nothing failed);
130 interrupted.

Errors are one line on stderr (``atlas-sweep: error: ...``) naming the problem; expected errors never
print a traceback (set ``ATLAS_DEBUG=1`` to get one for unexpected errors) and no message contains any
part of a password (:func:`airflow_atlas.kvs.scrub.scrub`).
"""
from __future__ import annotations

import os
import traceback

from ..errors import AtlasError, InvalidInputError, StoreAccessError, StoreUnavailableError, TableNotFoundError
from ..kvs.scrub import scrub, url_secrets
from .args import build_parser
from .certs import cmd_certs
from .grants import cmd_grants
from .init import cmd_init
from .metrics import cmd_metrics
from .output import (
    EXIT_ACCESS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SKIPPED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    PROG,
    CliError,
    ProgressBar,
    fail,
)
from .shards import cmd_shards
from .status import cmd_status, render_status
from .store import StoreHandle, chosen_url, open_store
from .sweep import cmd_sweep
from .timestamps import cmd_timestamps
from .verify import cmd_verify
from .workload import cmd_workload

COMMANDS = {
    # name: (function, must the store exist already?)
    "init": (cmd_init, False),
    "workload": (cmd_workload, True),
    "status": (cmd_status, True),
    "sweep": (cmd_sweep, True),
    "verify": (cmd_verify, True),
    "shards": (cmd_shards, True),
    "grants": (cmd_grants, True),
    "metrics": (cmd_metrics, True),
    "timestamps": (cmd_timestamps, True),
}
STORELESS = {"certs": cmd_certs}
"""The commands that open no store."""


def main(argv: list[str] | None = None) -> int:
    """Run ``atlas-sweep``; returns the exit code (see the module docstring)."""
    parser = build_parser()
    secrets: list[str] = []
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help / --version
            return int(exc.code or 0)
        if args.command in STORELESS:
            return STORELESS[args.command](args)
        secrets = url_secrets(chosen_url(args))
        fn, must_exist = COMMANDS[args.command]
        handle = open_store(args, must_exist=must_exist)
        secrets = handle.secrets or secrets
        try:
            return fn(args, handle)
        finally:
            try:
                handle.store.close()
            except Exception:
                pass
    except CliError as exc:
        return fail(exc.code, scrub(exc.message, secrets))
    except StoreAccessError as exc:
        return fail(EXIT_ACCESS, f"access refused: {scrub(str(exc), secrets)}")
    except StoreUnavailableError as exc:
        return fail(EXIT_UNAVAILABLE, f"store unavailable: {scrub(str(exc), secrets)}")
    except TableNotFoundError as exc:
        return fail(EXIT_USAGE, f"{scrub(str(exc), secrets)} (is the store initialized? run '{PROG} init')")
    except InvalidInputError as exc:
        return fail(EXIT_USAGE, scrub(str(exc), secrets))
    except AtlasError as exc:
        return fail(EXIT_FAILED, f"{type(exc).__name__}: {scrub(str(exc), secrets)}")
    except KeyboardInterrupt:
        return fail(EXIT_INTERRUPTED, "interrupted")
    except Exception as exc:  # unexpected: still one line, unless ATLAS_DEBUG asks for the traceback
        if os.environ.get("ATLAS_DEBUG"):
            traceback.print_exc()
        return fail(EXIT_FAILED, f"unexpected {type(exc).__name__}: {scrub(str(exc), secrets)}")


__all__ = [
    "main",
    "build_parser",
    "render_status",
    "open_store",
    "StoreHandle",
    "ProgressBar",
    "CliError",
    "COMMANDS",
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_USAGE",
    "EXIT_UNAVAILABLE",
    "EXIT_ACCESS",
    "EXIT_SKIPPED",
    "EXIT_INTERRUPTED",
]
