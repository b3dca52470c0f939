"""How fast ``benchtui --help`` answers, and what it imports (nothing heavy: target under 0.5 s).

.venv/bin/python benchmarks/help_latency.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("textual", "rich", "torch", "tensorflow", "keras", "jax", "numpy", "psutil", "pynvml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    script = shutil.which("benchtui", path=str(Path(sys.executable).parent))
    commands = {"benchtui --help": [script, "--help"]} if script else {}
    commands["python -m benchtui --help"] = [sys.executable, "-m", "benchtui", "--help"]
    commands["python -c pass (interpreter alone)"] = [sys.executable, "-c", "pass"]
    for label, cmd in commands.items():
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, check=True)
            times.append(time.perf_counter() - start)
        print(
            f"{label}: median {statistics.median(times) * 1000:.0f} ms, "
            f"min {min(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms ({args.repeat} runs)"
        )
    probe = (
        "import sys\nfrom benchtui.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = out.stdout.rsplit("HEAVY:", 1)[-1].strip()
    print(f"heavy modules imported by --help: {loaded or 'none'}")


if __name__ == "__main__":
    main()
