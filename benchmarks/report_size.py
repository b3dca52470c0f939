"""Size and build time of the HTML report of a full study session (target: under 2 MB).

    .venv/bin/python benchmarks/report_size.py [--dir DIR] [--keep]

The session has the study's shape: 7 models × 2 frameworks × 3 runs × 5 epochs × 800
batches, GPU samples every 0.5 s for about an hour. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tui"), str(ROOT / "runners"), str(ROOT / "tests")]

from benchtui.core.reporting.export import export_session  # noqa: E402

from benchtui_runners import catalog  # noqa: E402
from sessionfactory import make_session  # noqa: E402

LIMIT = 2 * 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="where to build the session (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.dir or Path(tmp)
        existing = sorted(root.glob("*_study-hour")) if args.dir else []
        # 39 runs × 4000 batches in about an hour: about 0.022 s per batch on average.
        path = (
            existing[0]
            if existing
            else make_session(
                root,
                name="study-hour",
                models=list(catalog.MODEL_ORDER),
                runs=3,
                epochs=5,
                steps=800,
                time_scale=0.31,
                write_summary=False,
            )
        )
        with open(path / "events.jsonl", "rb") as fh:
            lines = fh.readlines()
        gpu = sum(1 for line in lines if line.startswith(b'{"type":"gpu"'))
        print(
            f"session: {path.name}: {len(lines):,} events, {gpu:,} GPU samples "
            f"(~{gpu * 0.5 / 60:.0f} min at 0.5 s)"
        )
        for fmt in ("html", "md", "csv", "json"):
            t = time.perf_counter()
            out = export_session(path, fmt, Path(tmp) / f"report.{fmt}")
            dt = time.perf_counter() - t
            size = out.stat().st_size
            extra = f"  limit 2 MiB: {'OK' if size < LIMIT else 'TOO BIG'}" if fmt == "html" else ""
            print(f"{fmt:>4}: {size / 1024:8.1f} KiB in {dt:5.2f} s{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
