"""What the framework checks share: where the PyPI environment of tools/framework-venv.sh
is, the TAP skip, and re-running a check under that environment's Python."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.environ.get("SHARDSCOPE_FRAMEWORK_VENV") or os.path.join(ROOT, ".venv-frameworks")
VENV_PYTHON = os.path.join(VENV, "torch", "bin", "python")


def skip(reason):
    print("1..0 # SKIP %s" % reason)
    sys.exit(0)


def into_venv(script, modules):
    """Re-run @script under the torch venv's Python, or skip saying why not: the venv is
    missing, or it cannot import @modules."""
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(VENV, "torch")):
        return
    if not os.access(VENV_PYTHON, os.X_OK):
        skip("%s is missing: make it with tools/framework-venv.sh (or set "
             "$SHARDSCOPE_FRAMEWORK_VENV)" % VENV_PYTHON)
    p = subprocess.run([VENV_PYTHON, "-c", "import " + ", ".join(modules)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        skip("%s cannot import %s: %s" % (VENV_PYTHON, ", ".join(modules), last))
    sys.stdout.flush()
    os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(script)] + sys.argv[1:])
