#!/usr/bin/env bash
# Refresh requirements/lock.txt, the whole dependency tree `make install` installs (pyproject.toml's dependencies,
# its dev extra, and requirements/lock.in: pip itself), every version pinned and every file PyPI has of each version
# hashed, with markers for each Python that requires-python allows (one resolution: uv's universal mode; the
# replacements in requirements/overrides.txt applied).
#
#   make lock                      # keep every pin that still fits pyproject.toml; resolve only what changed
#   make lock ARGS=--upgrade       # the newest versions pyproject.toml allows, everything
#   make lock ARGS="--upgrade-package lightning"    # one package (and what it needs) only
#
# uv runs from a throwaway virtual environment; hashes come from PyPI alone (not from pip's configured mirrors or
# find-links), so any mirror serving PyPI's files verifies.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
UV_VERSION=0.13.10
LOWEST_PYTHON=3.10  # requires-python's lower bound: the universal resolution covers it and every later Python

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"

"$work/venv/bin/uv" pip compile pyproject.toml requirements/lock.in --extra dev --override requirements/overrides.txt \
  --universal --python-version "$LOWEST_PYTHON" --generate-hashes \
  --index-url https://pypi.org/simple --no-config --quiet \
  --custom-compile-command "make lock" --output-file requirements/lock.txt "$@"
echo "requirements/lock.txt: $(grep -c '^[A-Za-z0-9]' requirements/lock.txt) pins"
