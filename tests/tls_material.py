"""TLS material for the suite's timestamp servers: a CA of its own, a server certificate and a client certificate it
signs, as PEM files, made by the product's own ``atlas-sweep certs`` (:func:`airflow_atlas.timestamps.certs.
make_certificates`), so every TLS test of the suite also runs what a deployment makes. The keys are mode 0600.

``make_material(directory, hosts)`` -> :class:`Material`: the CA (ca.pem, ca.key), a server certificate for
``hosts`` (server.pem, server.key: subjectAltName IP or DNS of each host, so a client verifies the name it dials;
extended key usage serverAuth) and a client certificate (client.pem, client.key: clientAuth) - what a server
started with ``--client-ca-file ca.pem`` accepts and a client presents (``timestamp_tls_cert`` / ``_key``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_atlas.timestamps.certs import make_certificates

DAYS = 30


@dataclass(frozen=True)
class Material:
    """A CA's certificate (what clients pin, and what a server requiring client certificates trusts), a server
    certificate and key it signed, and a client certificate and key it signed."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path


def make_material(directory: Path, hosts: Sequence[str] = ("127.0.0.1", "localhost"), *,
                  name: str = "airflow-atlas timestamps test CA") -> Material:
    """A CA named ``name`` in ``directory`` and the server (for ``hosts``) and client certificates it signs
    (a directory that already holds valid ones for ``hosts`` keeps them)."""
    files = make_certificates(directory, hosts, days=DAYS, ca_name=name)
    return Material(ca=files.ca, cert=files.server_cert, key=files.server_key, client_cert=files.client_cert,
                    client_key=files.client_key)
