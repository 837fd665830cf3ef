"""``python -m kiln devices|demo|bench|inspect|run ...``: the ``kiln`` command itself (the same C++
code, tools/cli.cpp, inside the extension), so that a pip install has it without the C++ build
tree. ``bench --peers`` runs the peers with this interpreter unless ``--python`` names another.
"""
import os
import signal
import sys

from . import _kiln


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Ctrl-C ends the command as it ends the C++ one: Python's own handler would only set a flag
    # that nothing reads until the command returns.
    if argv is None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    peers = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_peers", "peers.py")
    return _kiln._run_command(["python -m kiln"] + args, sys.executable, peers)


if __name__ == "__main__":
    sys.exit(main())
