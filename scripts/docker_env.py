"""Write docker/airflow.env: docker/airflow.env.example with every empty secret filled by a freshly generated
one (the Fernet key, a JWT secret of 64 random bytes, the API secret key). Standard library only, so it
runs with any Python 3 on the host:

    python3 scripts/docker_env.py [--output PATH]

Never overwrites an existing file (delete it first to regenerate: changing the Fernet key makes the
stored connections and Variables unreadable). The file is created with mode 600 and is git-ignored.
"""
from __future__ import annotations

import argparse
import base64
import os
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

DOCKER = Path(__file__).resolve().parents[1] / "docker"
EXAMPLE = DOCKER / "airflow.env.example"
OUTPUT = DOCKER / "airflow.env"

JWT_SECRET_BYTES = 64
"""Random bytes of the JWT secret: HS512 wants a key of at least 64 bytes."""

GENERATORS: dict[str, Callable[[], str]] = {
    "AIRFLOW__CORE__FERNET_KEY": lambda: base64.urlsafe_b64encode(os.urandom(32)).decode(),
    "AIRFLOW__API_AUTH__JWT_SECRET": lambda: secrets.token_urlsafe(JWT_SECRET_BYTES),
    "AIRFLOW__API__SECRET_KEY": lambda: secrets.token_urlsafe(32),
}
"""Each secret of the example file and how to make one."""


def render(example: str) -> str:
    """``example`` with each ``NAME=`` line of :data:`GENERATORS` given a generated value (values already
    there are kept); a secret missing from the example is an error."""
    out, seen = [], set()
    for line in example.splitlines():
        name, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#") and name.strip() in GENERATORS:
            seen.add(name.strip())
            if not value.strip():
                line = f"{name.strip()}={GENERATORS[name.strip()]()}"
        out.append(line)
    missing = sorted(set(GENERATORS) - seen)
    if missing:
        raise SystemExit(f"{EXAMPLE} lacks {', '.join(missing)}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"where to write (default {OUTPUT})")
    args = parser.parse_args(argv)
    if args.output.exists():
        print(f"{args.output} exists: kept (delete it first to generate new secrets)", file=sys.stderr)
        return 1
    text = render(EXAMPLE.read_text())
    fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    print(f"wrote {args.output} (mode 600; keep it out of version control)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
