"""The engine as a Spark artifact: a zip of ``airflow_atlas`` for ``spark-submit --py-files``.

Spark executors need the engine (this package) but never the Airflow glue: the zip holds every file of
``airflow_atlas/`` except the ``airflow_atlas/airflow`` subpackage, caches and compiled files. It is
named after a hash of its contents, so building it again for unchanged sources returns the existing file
and a changed engine never reuses a stale zip::

    from airflow_atlas.spark.artifact import build_engine_zip
    path = build_engine_zip("/var/cache/atlas-spark")   # .../airflow_atlas-engine-<hash>.zip

The zip's entries carry a fixed date, so equal sources give byte-identical zips. Third-party
dependencies (cassandra-driver) are not in it: see docs/SPARK.md for getting them onto executors.

This module is part of the engine: it imports neither Airflow nor pyspark.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # airflow_atlas/ (this file is airflow_atlas/spark/artifact.py)
EXCLUDED_SUBPACKAGES = ("airflow",)
"""Subpackages of airflow_atlas left out of the executor artifact (Airflow glue)."""

_EXCLUDED_DIR_NAMES = {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
_EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".swp", "~")
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
ZIP_PREFIX = "airflow_atlas-engine-"


def engine_files(package_dir: Path | str = PACKAGE_DIR) -> list[tuple[str, Path]]:
    """``(archive name, source path)`` of every file that goes into the engine zip, sorted by name."""
    package_dir = Path(package_dir)
    root_name = package_dir.name
    out: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(package_dir):
        rel_dir = Path(dirpath).relative_to(package_dir)
        # Prune in place so os.walk does not descend into excluded directories.
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in _EXCLUDED_DIR_NAMES
            and not d.startswith(".")
            and not (rel_dir == Path(".") and d in EXCLUDED_SUBPACKAGES)
        )
        for name in sorted(filenames):
            if name.startswith(".") or name.endswith(_EXCLUDED_SUFFIXES):
                continue
            arcname = (Path(root_name) / rel_dir / name).as_posix()
            out.append((arcname, Path(dirpath) / name))
    out.sort(key=lambda item: item[0])
    return out


def _hash_contents(contents: list[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for arcname, data in contents:
        digest.update(arcname.encode("utf-8") + b"\0")
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def engine_content_hash(package_dir: Path | str = PACKAGE_DIR) -> str:
    """SHA-256 (hex) over the archive names and contents of the engine files."""
    return _hash_contents([(name, path.read_bytes()) for name, path in engine_files(package_dir)])


def build_engine_zip(dest_dir: str | os.PathLike, *, package_dir: Path | str = PACKAGE_DIR) -> str:
    """Build (or reuse) the engine zip in ``dest_dir`` and return its absolute path.

    The file name carries the first 16 hex digits of :func:`engine_content_hash`; an existing file of
    that name is reused. The zip is written to a temporary file in ``dest_dir`` and renamed into place,
    so concurrent builders (several Airflow tasks on one worker) never see a half-written zip.
    """
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    # Read every file once: the name (hash) and the zip's contents come from the same bytes even if
    # the sources change meanwhile.
    contents = [(name, path.read_bytes()) for name, path in engine_files(package_dir)]
    if not any(name == f"{Path(package_dir).name}/__init__.py" for name, _ in contents):
        raise FileNotFoundError(f"{package_dir} is not a Python package (no __init__.py)")
    content_hash = _hash_contents(contents)
    target = dest / f"{ZIP_PREFIX}{content_hash[:16]}.zip"
    if target.is_file():
        return str(target.resolve())
    fd, tmp_name = tempfile.mkstemp(prefix=".engine-", suffix=".zip.tmp", dir=dest)
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for arcname, data in contents:
                info = zipfile.ZipInfo(arcname, date_time=_ZIP_DATE)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, data)
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    return str(target.resolve())
