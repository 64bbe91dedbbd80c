"""Check what the machine must provide before `make install`: the Python version, the venv module, headless GL.

    python3 scripts/check_prereqs.py                 # silent and exit 0, or one `error:` line per missing piece
    python3 scripts/check_prereqs.py --venv .venv     # the virtual environment the Makefile builds

`make install`, `make test` and `make demo` run it first (Makefile). See act/common/prereqs.py.
"""

import sys
from pathlib import Path

# It runs under the interpreter that will build .venv, before the project is installed into anything.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from act.common.prereqs import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
