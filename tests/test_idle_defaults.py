"""Issue 30, the plan's part: defaults a newcomer meets on a busy CPU. The quick preset's duration comes
from the idle cores, a CPU plan's threads are the idle cores (measured once, recorded, said), the quick
preset compares the same network on both sides, ``run`` with no flags is quick without a GPU, presets as
the positional PLAN, a user-level sessions folder, and the smaller items of its section 5."""

from __future__ import annotations

import re

from benchtui.core.plan.estimate import cpu_seconds, duration_words, long_cpu_warning, preset_words
from benchtui.core.plan.plan import from_preset


# -- the quick preset's duration comes from the idle cores ---------------------------------------------
def test_the_quick_presets_words_come_from_the_idle_cores() -> None:
    quick = from_preset("quick")
    busy, idle = preset_words("quick", 0.3), preset_words("quick", 2.0)
    for cores, words in ((0.3, busy), (2.0, idle)):
        assert words == f"about {duration_words(cpu_seconds(quick, cores))}", words
        assert re.fullmatch(r"about \d+ minutes?", words), words
    # A machine whose cores others keep busy takes longer than the same machine idle.
    assert cpu_seconds(quick, 0.3) > cpu_seconds(quick, 1.0) > cpu_seconds(quick, 2.0)
    assert busy != idle
    # The long-plan warning points at the quick preset with the same words, not a fixed "two minutes".
    warning = long_cpu_warning(from_preset("study"), cores=0.3)
    assert (
        warning.endswith(f"--preset quick measures both frameworks in {busy}")
        and "two minutes" not in warning
    )
