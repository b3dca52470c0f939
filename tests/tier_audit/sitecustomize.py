"""On the path of every process a test starts, only while the tiers are audited
(``BENCHTUI_TESTS_AUDIT_TIERS=1``, see conftest.py): the first import of a framework in this
process appends the test that started it (``PYTEST_CURRENT_TEST``, which pytest sets and every
child inherits) and the framework's name to the file ``BENCHTUI_TESTS_FRAMEWORK_LOG`` names."""

from __future__ import annotations

import os
import sys

FRAMEWORKS = frozenset({"torch", "tensorflow", "jax", "keras"})


class _Noticer:
    """A finder that finds nothing: it only notices a framework's first import, once a process."""

    noticed = False

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if not _Noticer.noticed and name in FRAMEWORKS:
            _Noticer.noticed = True
            log = os.environ.get("BENCHTUI_TESTS_FRAMEWORK_LOG")
            test = os.environ.get("PYTEST_CURRENT_TEST")
            if log and test:
                with open(log, "a", encoding="utf-8") as f:  # one short line: appends do not interleave
                    f.write(f"{test}\t{name}\n")
        return None


sys.meta_path.insert(0, _Noticer())  # type: ignore[arg-type]
