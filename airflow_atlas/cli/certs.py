"""``atlas-sweep certs DIR --host NAME ...``: the timestamp servers' CA, server and client certificates
(:mod:`airflow_atlas.timestamps.certs`) for a deployment without a PKI of its own; needs no store. Idempotent:
a directory holding them is kept; prints the files and the flags and settings that use them."""
from __future__ import annotations

import argparse

from ..serialisation import to_json
from ..timestamps.certs import make_certificates
from .output import EXIT_OK, emit_json, wants_json


def cmd_certs(args: argparse.Namespace) -> int:
    files = make_certificates(args.directory, args.host, days=args.days)
    if wants_json(args):
        emit_json(to_json(files))
        return EXIT_OK
    verb = "made" if files.created else "kept (already there)"
    print(f"{verb}: the timestamp servers' certificates in {files.directory}\n"
          f"  servers: atlas-sweep timestamps serve --cert-file {files.server_cert} --key-file {files.server_key} "
          f"--client-ca-file {files.ca}\n"
          f"  clients: timestamp_tls_ca={files.ca} timestamp_tls_cert={files.client_cert} "
          f"timestamp_tls_key={files.client_key} (or $ATLAS_TIMESTAMP_TLS_CA, _CERT, _KEY)\n"
          f"  keep {files.directory / 'ca.key'} offline once the certificates are made: it signs new ones")
    return EXIT_OK

