"""The "why" of ``--profile`` in every report: where each framework's step goes, the differences, the sentence.

Sessions are written by tests/sessionfactory.py as the engine writes them (``profile=``: each
runner's ``profile`` event after its timed epochs, its trace in traces/; ``counters=`` and
``gpu_counters=``: the sampler's counters event and readings); ``show`` and ``export`` run through
the real CLI. The expected figures are worked out here from the summary's rows and the shares the
factory was given, not from the code under test.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
from html import escape
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from tests.reporttext import flat, html_table, md_section, shown, terminal_rows, written

from benchtui.core.model import why
from benchtui.core.model.session_model import SessionModel
from benchtui.core.model.why import CATEGORY_LABELS, ms, signed_ms
from benchtui.core.model.why import share_text as percent
from benchtui.core.plan.plan import Plan
from benchtui.core.reporting import htmlreport, jsonfile, markdown, terminal
from benchtui.core.reporting.model import Report, build_report
from benchtui.core.reporting.plots import CATEGORY_COLORS
from benchtui.core.store.session import SessionFolder, load_session
from benchtui.core.wire.events import Malformed, check_event, parse_line
from sessionfactory import PROFILE_SHARES, make_session, read_events
from support import benchtui

FRAMEWORKS = ("torch", "tensorflow")
LABELS = {"torch": "PyTorch", "tensorflow": "tf.keras"}
CATEGORIES = tuple(CATEGORY_LABELS)
#: tf.keras's made-up shares: more normalization and input, less idle than PyTorch's (PROFILE_SHARES).
TF_SHARES = {
    "conv": 0.40,
    "matmul": 0.05,
    "norm": 0.20,
    "elementwise": 0.12,
    "optimizer": 0.05,
    "data": 0.06,
    "communication": 0.0,
    "other": 0.04,
    "idle": 0.08,
}
SHARES = {"torch": PROFILE_SHARES["torch"], "tensorflow": TF_SHARES}
OVERHEAD = {"torch": 0.05, "tensorflow": 0.8}  # tf.keras's profiler slows its step: flagged
GPU_COUNTERS = {
    "torch": {"sm_active": 62.0, "tensor_active": 3.0, "dram_active": 35.0},
    "tensorflow": {"sm_active": 48.0, "tensor_active": 2.0, "dram_active": 30.0},
}
DCGM = {"available": True, "source": "DCGM profiling fields", "reason": ""}
TITLE = "Why: ResNet50, where a step goes (ms per step)"


def session(root: Path, **options: Any) -> Path:
    """A two-framework session of ResNet50 at batch 16: 2 runs of 3 epochs of 8 steps, on a GPU."""
    settings: dict[str, Any] = {
        "frameworks": FRAMEWORKS,
        "runs": 2,
        "epochs": 3,
        "steps": 8,
        "batch_size": 16,
    }
    return make_session(root, **{**settings, **options})


@pytest.fixture(scope="module")
def profiled_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    profile = {(fw, "resnet50"): {"shares": SHARES[fw], "overhead": OVERHEAD[fw]} for fw in FRAMEWORKS}
    return session(
        tmp_path_factory.mktemp("profiled"), profile=profile, counters=DCGM, gpu_counters=GPU_COUNTERS
    )


@pytest.fixture(scope="module")
def profiled(profiled_path: Path) -> Report:
    return build_report(load_session(profiled_path))


@pytest.fixture(scope="module")
def cli(profiled_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the real CLI prints and writes for the profiled session: show, and md, html and json exports."""
    out = tmp_path_factory.mktemp("exports")
    done = benchtui("show", str(profiled_path))
    assert done.returncode == 0, done.stderr
    texts = {"show": done.stdout}
    for name in ("md", "html", "json"):
        target = profiled_path / f"report.{name}"  # in the session folder: where traces/ is
        done = benchtui("export", str(profiled_path), "--format", name, "-o", str(target))
        assert done.returncode == 0, done.stderr
        texts[name] = target.read_text(encoding="utf-8")
    elsewhere = out / "summary.md"  # written elsewhere too: the same text
    assert benchtui("export", str(profiled_path), "--format", "md", "-o", str(elsewhere)).returncode == 0
    return texts


# -- what the tests expect, worked out from the summary's rows and the factory's inputs --------------
def timed_step(report: Report, framework: str) -> float:
    """Seconds per step behind the verdict: the batch over the row's images/s (the epochs after the first)."""
    row = next(r for r in report.summary.rows if r.framework == framework)
    return row.batch_size / row.images_per_s


def expected_seconds(
    report: Report, framework: str, shares: dict[str, float] | None = None
) -> dict[str, float]:
    step = timed_step(report, framework)
    return {c: (shares or SHARES[framework])[c] * step for c in CATEGORIES}


def expected_differences(report: Report) -> list[tuple[str, float]]:
    """(category, tf.keras less PyTorch in seconds per step), the largest first (the categories' order on ties)."""
    torch, tf = expected_seconds(report, "torch"), expected_seconds(report, "tensorflow")
    diffs = [(c, tf[c] - torch[c]) for c in CATEGORIES]
    return sorted(diffs, key=lambda d: (-round(abs(d[1]), 12), CATEGORIES.index(d[0])))


def expected_breakdown(report: Report) -> list[list[str]]:
    torch, tf = expected_seconds(report, "torch"), expected_seconds(report, "tensorflow")
    rows = [
        [
            CATEGORY_LABELS[c],
            f"{ms(torch[c])} ({percent(SHARES['torch'][c])})",
            f"{ms(tf[c])} ({percent(TF_SHARES[c])})",
            signed_ms(d),
        ]
        for c, d in expected_differences(report)
    ]
    steps = [timed_step(report, fw) for fw in FRAMEWORKS]
    return [*rows, ["Step (timed)", ms(steps[0]), ms(steps[1]), signed_ms(steps[1] - steps[0])]]


def expected_sentence(report: Report) -> str:
    (first, a), (second, b) = expected_differences(report)[:2]
    assert (first, second) == ("norm", "data") and b >= 0.25 * a  # as the shares were chosen
    return (
        f"tf.keras spends {a * 1000:.1f} ms more per step in normalization and {b * 1000:.1f} ms more in "
        "input & host-to-device than PyTorch; GPU idle 8% vs 10%"
    )


def profiled_steps(path: Path, framework: str) -> list[float]:
    return [e["step_s"] for e in read_events(path) if e.get("type") == "profile" and framework in e["run"]]


# -- the numbers ---------------------------------------------------------------------------------------
def test_each_frameworks_shares_are_applied_to_its_timed_step(profiled: Report) -> None:
    (entry,) = profiled.summary.to_json()["why"]
    assert entry["model"] == "resnet50" and entry["frameworks"] == list(FRAMEWORKS)
    for side in entry["sides"]:
        fw = side["framework"]
        step = timed_step(profiled, fw)
        assert side["timed_step_s"] == pytest.approx(step, rel=1e-12)
        assert side["runs"] == side["profiled_runs"] == 2 and side["steps"] == 10
        expected = expected_seconds(profiled, fw)
        for c in CATEGORIES:
            assert side["categories"][c]["share"] == pytest.approx(SHARES[fw][c], abs=1e-12)
            assert side["categories"][c]["seconds"] == pytest.approx(expected[c], abs=1e-12)
        # A column adds up to the step that defines the verdict's ratio, not the profiled one.
        assert math.fsum(v["seconds"] for v in side["categories"].values()) == pytest.approx(step, rel=1e-12)
    (pair,) = entry["pairs"]
    assert (pair["base"], pair["framework"], pair["slower"]) == ("torch", "tensorflow", "tensorflow")
    got = [(d["category"], d["seconds"]) for d in pair["differences"]]
    assert [c for c, _ in got] == [c for c, _ in expected_differences(profiled)]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected_differences(profiled)], abs=1e-12)


def test_the_breakdown_table_and_the_sentence(profiled: Report) -> None:
    (view,) = profiled.why
    assert view.table.title == TITLE
    assert view.table.header == [
        "Category",
        "PyTorch (ms/step)",
        "tf.keras (ms/step)",
        "tf.keras − PyTorch (ms)",
    ]
    assert view.table.rows == expected_breakdown(profiled)
    assert view.text == [expected_sentence(profiled)]
    # The differences add up to the difference between the timed steps (the ratio's).
    total = sum(s for _, s in expected_differences(profiled))
    steps = [timed_step(profiled, fw) for fw in FRAMEWORKS]
    assert total == pytest.approx(steps[1] - steps[0], rel=1e-9)


def test_the_profiled_step_and_the_profilers_overhead_are_stated_and_a_large_one_flagged(
    profiled_path: Path, profiled: Report
) -> None:
    (view,) = profiled.why
    for fw, line in zip(FRAMEWORKS, view.lines, strict=False):
        profiled_step = sum(profiled_steps(profiled_path, fw)) / 2
        overhead = profiled_step / timed_step(profiled, fw) - 1
        assert line.startswith(f"{LABELS[fw]}: ")
        assert f"timed step {ms(timed_step(profiled, fw))} ms (the epochs after the first)" in line
        assert f"profiled step {ms(profiled_step)} ms (profiler overhead {overhead:+.0%})" in line
        flagged = "above +50%, the profile may not divide the step as it runs untraced" in line
        assert flagged is (fw == "tensorflow"), line
    sides = {s["framework"]: s for s in profiled.summary.to_json()["why"][0]["sides"]}
    assert sides["tensorflow"]["overhead_flagged"] and not sides["torch"]["overhead_flagged"]
    assert sides["tensorflow"]["overhead"] > 0.5


def test_the_counters_in_words(profiled_path: Path, profiled: Report) -> None:
    util = {
        fw: sum(
            u := [
                e["gpu_util"] for e in read_events(profiled_path) if e["type"] == "run_end" and fw in e["run"]
            ]
        )
        / len(u)
        for fw in FRAMEWORKS
    }
    line = (
        "GPU counters, PyTorch vs tf.keras: SM active 62% vs 48%, tensor cores active 3% vs 2%, DRAM active 35% "
        "vs 30% (DCGM profiling fields, means while training); NVML utilization "
        f"{util['torch']:.0f}% vs {util['tensorflow']:.0f}% (a kernel was running, not how busy the SMs were)"
    )
    assert profiled.why[0].lines[2] == line
    assert profiled.summary.to_json()["counters"] == DCGM


def test_several_runs_average_the_shares_of_the_runs_that_have_a_profile(tmp_path: Path) -> None:
    one = {**PROFILE_SHARES["torch"], "conv": 0.55, "idle": 0.0}
    two = {**PROFILE_SHARES["torch"], "conv": 0.35, "idle": 0.20}
    profile = {("torch", "resnet50", 1): {"shares": one}, ("torch", "resnet50", 2): {"shares": two}}
    path = session(tmp_path, runs=3, profile={**profile, ("tensorflow", "resnet50"): {}})
    report = build_report(load_session(path))
    torch = report.why[0].data.side("torch")
    assert torch is not None and (torch.runs, torch.profiled) == (3, 2)
    assert torch.shares["conv"] == pytest.approx(0.45) and torch.shares["idle"] == pytest.approx(0.10)
    step = timed_step(report, "torch")
    assert torch.seconds("conv") == pytest.approx(0.45 * step)
    assert "10 steps profiled in 2 of 3 runs" in report.why[0].lines[0]
    # The run that sent none: the plan asked for profiles, so it is said.
    row = next(r for r in report.summary.rows if r.framework == "torch")
    assert {
        "kind": "profile",
        "message": "profile unavailable: the runner sent no profile (run 3)",
    } in row.warnings


# -- every view -------------------------------------------------------------------------------------
def test_show_prints_the_breakdown_the_sentence_the_profiles_and_the_longest_ops(
    profiled: Report, cli: dict[str, str]
) -> None:
    out = cli["show"]
    assert TITLE in out
    expected = expected_breakdown(profiled)
    for row in expected:
        assert terminal_rows(out, row[0]) == [row]
    text = flat(out)
    assert expected_sentence(profiled) in text
    for line in profiled.why[0].lines:
        assert flat(line) in text
    assert "Why: ResNet50, the longest ops" in out
    assert terminal_rows(out, "PyTorch")[0][:3] == ["PyTorch", "aten::cudnn_convolution", "convolution"]
    for run in ("001-torch-resnet50-1.pt.trace.json.gz", "002-tensorflow-resnet50-1.xplane.pb"):
        assert f"traces/{run} in the session folder" in text
    assert "so a column adds up to the step behind the verdict's ratio" in text
    # After the verdict it explains.
    assert out.index("The verdict: frameworks compared") < out.index(TITLE)


def test_markdown_has_the_table_the_sentence_and_links_to_the_traces(
    profiled: Report, cli: dict[str, str]
) -> None:
    section = md_section(cli["md"], TITLE)
    for row in expected_breakdown(profiled):
        cells = [c.replace("&", "&amp;") for c in row]
        assert "| " + " | ".join(cells) + " |" in section
    assert f"**{expected_sentence(profiled).replace('&', '&amp;')}**" in section
    assert "- Trace, PyTorch, 001-torch-resnet50-1: [traces/001-torch-resnet50-1.pt.trace.json.gz]" in section
    assert "(traces/001-torch-resnet50-1.pt.trace.json.gz) (16 B)" in section
    assert "| PyTorch | aten::cudnn_convolution | convolution |" in md_section(
        cli["md"], "Why: ResNet50, the longest ops"
    )


def test_html_has_the_table_the_sentence_and_a_stacked_bar_per_framework(
    profiled: Report, cli: dict[str, str]
) -> None:
    html = cli["html"]
    assert html_table(html, TITLE) == [profiled.why[0].table.header, *expected_breakdown(profiled)]
    assert f'<p class="sig">{escape(expected_sentence(profiled), quote=True)}</p>' in html
    assert '<a href="traces/001-torch-resnet50-1.pt.trace.json.gz">' in html
    svg = html[html.index('aria-label="ResNet50: where a step goes"') :].split("</svg>")[0]
    widths: dict[str, float] = {}
    for fw in FRAMEWORKS:
        seconds = expected_seconds(profiled, fw)
        step = timed_step(profiled, fw)
        for c in CATEGORIES:
            found = re.findall(
                rf'width="([\d.]+)" height="30" fill="{CATEGORY_COLORS[c]}"[^>]*><title>{LABELS[fw]} · '
                rf"{re.escape(escape(CATEGORY_LABELS[c]))}: ([^ ]+) ms \((\d+)%\)</title>",
                svg,
            )
            if seconds[c] == 0:
                assert found == []  # nothing drawn for an empty category
                continue
            ((width, value, share),) = found
            assert value == ms(seconds[c]) and int(share) == round(100 * seconds[c] / step)
            widths[fw] = widths.get(fw, 0.0) + float(width)
    # One scale: the bars are as long as their steps.
    steps = {fw: timed_step(profiled, fw) for fw in FRAMEWORKS}
    assert widths["tensorflow"] / widths["torch"] == pytest.approx(
        steps["tensorflow"] / steps["torch"], rel=0.01
    )
    for c in CATEGORIES:  # a legend entry per category drawn
        assert (f">{escape(CATEGORY_LABELS[c])}</text>" in svg) is (c != "communication")


def test_json_export_carries_the_why_and_the_counters(profiled: Report, cli: dict[str, str]) -> None:
    data = json.loads(cli["json"])
    (entry,) = data["why"]
    assert entry["text"] == expected_sentence(profiled)
    norm = {s["framework"]: s["categories"]["norm"]["seconds"] for s in entry["sides"]}
    assert norm == pytest.approx({fw: expected_seconds(profiled, fw)["norm"] for fw in FRAMEWORKS})
    assert data["counters"] == DCGM
    assert entry["sides"][0]["traces"][0]["path"] == "traces/001-torch-resnet50-1.pt.trace.json.gz"


def test_a_headless_run_and_the_sessions_screen_say_why(
    profiled: Report, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal.print_result(profiled, "fixture")
    out = capsys.readouterr().out
    assert terminal_rows(out, "normalization") == [expected_breakdown(profiled)[0]]
    screen = io.StringIO()
    Console(file=screen, width=300).print(terminal.summary_view(profiled, 300))
    assert f"ResNet50 why · {expected_sentence(profiled)}" in screen.getvalue()


@pytest.mark.parametrize("width", [80, 120])
def test_a_narrow_terminal_keeps_every_figure_of_the_breakdown_whole(profiled: Report, width: int) -> None:
    out = shown(profiled, width)
    assert max(len(line.rstrip()) for line in out.splitlines()) <= width
    for row in expected_breakdown(profiled):
        assert all(cell in out for cell in row[1:]), (width, row)


# -- a profiler that fails, a trace dropped ------------------------------------------------------------
@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    profile = {
        ("torch", "resnet50"): {"ok": False, "reason": "profile unavailable: torch.profiler found no CUPTI"},
        ("tensorflow", "resnet50"): {
            "trace": False,
            "trace_note": "trace dropped: 412 MB over the 200 MB cap",
        },
    }
    path = session(tmp_path_factory.mktemp("failed"), profile=profile)
    return path, build_report(load_session(path))


def test_a_failed_profile_is_a_note_on_the_run_never_a_failed_run(failed: tuple[Path, Report]) -> None:
    path, report = failed
    assert report.status == "complete"
    rows = {r.framework: r for r in report.summary.rows}
    assert {r.status for r in rows.values()} == {"ok"} and all(r.runs == 2 for r in rows.values())
    note = "profile unavailable: torch.profiler found no CUPTI (runs 1, 2)"
    assert list(rows["torch"].warnings) == [{"kind": "profile", "message": note}]
    out = flat(benchtui("show", str(path)).stdout)
    assert f"* ResNet50 · PyTorch: caution: {note}" in out
    assert f"- ResNet50 · PyTorch: {note}" in written(report, markdown)
    assert f"<li>ResNet50 · PyTorch: {escape(note)}</li>" in written(report, htmlreport)
    # The why of the framework that has one, and a line for the one that has none.
    (view,) = report.why
    assert view.table.header == ["Category", "tf.keras (ms/step)"] and view.text == []
    assert view.lines[-1] == f"PyTorch: {note}"
    assert [row[0] for row in view.table.rows[:-1]] == [CATEGORY_LABELS[c] for c in CATEGORIES]


def test_a_dropped_trace_is_a_note_and_no_link(failed: tuple[Path, Report]) -> None:
    path, report = failed
    tf = next(r for r in report.summary.rows if r.framework == "tensorflow")
    note = "trace dropped: 412 MB over the 200 MB cap (runs 1, 2)"
    assert list(tf.warnings) == [{"kind": "profile", "message": note}]
    assert report.why[0].traces == [] and not (path / "traces").exists()
    html = written(report, htmlreport)
    assert f"ResNet50 · tf.keras: {escape(note)}" in html and "<a href" not in html
    assert note in flat(shown(report))


# -- hostile input ------------------------------------------------------------------------------------------
HOSTILE = "<script>alert(1)</script> | [bold]x[/] `y` \x1b]0;pwned\x07 done"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    ops = [{"name": "<img src=x onerror=alert(1)>|", "category": "conv", "seconds": 0.01, "share": 0.2}]
    ops += [{"name": f"op{i}", "category": "norm", "seconds": 0.0001} for i in range(5000)]
    profile = {
        ("torch", "resnet50"): {
            "raw": {"profiler": HOSTILE, "top": ops, "trace": {"file": "../../../etc/passwd", "bytes": 5}}
        },
        ("tensorflow", "resnet50"): {"raw": {"categories": {"conv": -0.01, "norm": 0.02}}},
    }
    path = session(tmp_path_factory.mktemp("hostile"), profile=profile)
    return path, build_report(load_session(path))


def test_hostile_profiles_are_made_safe(hostile: tuple[Path, Report]) -> None:
    path, report = hostile
    (entry,) = report.summary.to_json()["why"]
    (torch,) = entry["sides"]  # tf.keras's breakdown is unusable: no side, a note
    assert len(torch["top"]) == 12 and torch["top"][0]["name"] == "<img src=x onerror=alert(1)>|"
    assert torch["traces"] == []
    rows = {r.framework: r for r in report.summary.rows}
    assert list(rows["torch"].warnings) == [
        {
            "kind": "profile",
            "message": "trace not linked: its file name is not a plain name inside the traces folder (runs 1, 2)",
        }
    ]
    unusable = "profile unavailable: the runner's breakdown is unusable (categories.conv is -0.01, outside [0, 1e+09])"
    assert list(rows["tensorflow"].warnings) == [{"kind": "profile", "message": f"{unusable} (runs 1, 2)"}]
    html, md, out = written(report, htmlreport), written(report, markdown), shown(report)
    for text in (html, md, out):
        assert "etc/passwd" not in text and "\x1b" not in text and "pwned" not in text
    for text in (html, md):
        assert "<script>" not in text and "<img" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;|" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; | [bold]x[/]" in html
    assert "| PyTorch | &lt;img src=x onerror=alert(1)&gt;\\| | convolution |" in md
    assert "<script>alert(1)</script> | [bold]x[/] `y`" in flat(out)  # printed as it is, never markup


@pytest.mark.parametrize(
    ("categories", "why"),
    [
        ({"conv": float("nan")}, "categories.conv is not finite"),
        ({"conv": float("inf")}, "categories.conv is not finite"),
        ({"conv": -0.001, "idle": 0.01}, "categories.conv is -0.001, outside [0, 1e+09]"),
        ({"conv": True}, "categories.conv is bool, not a number"),
        ({"conv": "0.01"}, "categories.conv is str, not a number"),
        ({"conv": 0.0, "idle": 0.0}, "no time in any category"),
        ({f"c{i}": 0.001 for i in range(65)}, "categories is not an object of 1 to 64 numbers"),
        ([0.01], "categories is not an object of 1 to 64 numbers"),
    ],
)
def test_a_breakdown_that_is_not_finite_non_negative_seconds_becomes_a_failed_profile(
    categories: Any, why: str
) -> None:
    event = check_event({"type": "profile", "t": 1.0, "run": "r", "ok": True, "categories": categories})
    assert event == {
        "type": "profile",
        "t": 1.0,
        "run": "r",
        "ok": False,
        "reason": f"profile unavailable: the runner's breakdown is unusable ({why})",
    }


def test_the_profile_events_fields_are_checked_one_by_one() -> None:
    with pytest.raises(Malformed, match="profile.ok"):
        check_event({"type": "profile", "categories": {"conv": 0.01}})
    with pytest.raises(Malformed, match="too large"):
        parse_line('{"type": "profile", "ok": true, "categories": {"conv": 1e999}}')
    event = check_event(
        {
            "type": "profile",
            "ok": True,
            "categories": {"conv": 0.01, "attention": 0.002},  # a newer runner's category: other ops
            "steps": -3,
            "step_s": float("nan"),
            "device": "tpu",
            "profiler": 7,
            "newer": {"kept": True},
            "top": [
                {"name": "a", "seconds": -1},
                "x",
                {"name": "b", "seconds": 0.001, "calls": -2, "share": 3},
            ],
            "trace": {"file": "run.pt.trace.json.gz", "bytes": -1},
        }
    )
    assert event["categories"] == {**dict.fromkeys(CATEGORIES, 0.0), "conv": 0.01, "other": 0.002}
    assert not {"steps", "step_s", "device", "profiler"} & set(event) and event["newer"] == {"kept": True}
    assert event["top"] == [{"name": "b", "category": "other", "seconds": 0.001}]
    many = [{"name": f"op{i}", "seconds": 0.001} for i in range(100_000)]  # only the first few are read
    checked = check_event({"type": "profile", "ok": True, "categories": {"conv": 1.0}, "top": many})
    assert [op["name"] for op in checked["top"]] == [f"op{i}" for i in range(12)]
    assert event["trace"] == {"file": "run.pt.trace.json.gz"} and event["trace_note"] is None
    for name in ("../x", "a/b", "a\\b", "..", ".", "", "a\x00b", "x" * 256, 3):
        checked = check_event(
            {"type": "profile", "ok": True, "categories": {"conv": 1.0}, "trace": {"file": name}}
        )
        assert checked["trace"] is None and checked["trace_note"].startswith("trace not linked"), name
    failed = check_event({"type": "profile", "ok": False, "reason": ["not text"]})
    assert failed["reason"] == "" and why.unavailable_text(failed["reason"]) == (
        "profile unavailable (the runner gave no reason)"
    )
    assert why.unavailable_text("no CUPTI") == "profile unavailable: no CUPTI"


def test_the_gpu_counters_and_the_counters_event_are_checked() -> None:
    sample = {"type": "gpu", "t": 1.0, "gpus": [{"index": 0, "util": 90, "sm_active": 55.5}], "watched": 0}
    assert check_event(sample) is sample
    for name in ("sm_active", "tensor_active", "dram_active"):
        for bad in (100.5, -1, True, "50"):
            with pytest.raises(Malformed, match=name):
                check_event({"type": "gpu", "t": 1.0, "gpus": [{"index": 0, name: bad}]})
    with pytest.raises(Malformed, match="available"):
        check_event({"type": "counters", "t": 1.0, "source": "DCGM"})
    with pytest.raises(Malformed, match="counters.available"):
        check_event({"type": "counters", "t": 1.0, "available": "yes"})
    with pytest.raises(Malformed, match="run_end.sm_active"):
        check_event({"type": "run_end", "t": 1.0, "run": "r", "sm_active": 101})


@pytest.mark.parametrize("link", ["file", "folder"])
def test_a_trace_through_a_link_is_not_linked(tmp_path: Path, link: str) -> None:
    """Never a link to follow: not the trace (to a file outside the session folder), nor traces/ (to another
    folder, even one inside the session folder)."""
    path = session(tmp_path / "s", frameworks=("torch",), runs=1, profile={("torch", "resnet50"): {}})
    trace = path / "traces" / "001-torch-resnet50-1.pt.trace.json.gz"
    if link == "file":
        secret = tmp_path / "secret"
        secret.write_text("secret", encoding="utf-8")
        trace.unlink()
        os.symlink(secret, trace)
    else:
        (path / "traces").rename(path / "elsewhere")
        os.symlink(path / "elsewhere", path / "traces")
    report = build_report(load_session(path))
    html, md = written(report, htmlreport), written(report, markdown)
    for text in (html, md):
        assert "traces/001-torch-resnet50-1.pt.trace.json.gz (not in the session folder)" in text
    assert "<a href" not in html and "](traces/" not in md


# -- the counters: sampled while training, recorded by the engine, or plainly absent ----------------------
def test_the_counters_are_sampled_while_the_run_trains_never_while_it_profiles() -> None:
    plan = Plan(
        frameworks=["torch"], models=["resnet50"], runs=1, epochs=1, samples=8, batch_sizes={"resnet50": 8}
    )
    model = SessionModel(plan)
    (rid,) = model.runs

    def sample(value: float) -> None:
        model.apply(
            {
                "type": "gpu",
                "t": 1.0,
                "run": rid,
                "watched": 0,
                "host": {},
                "gpus": [{"util": 99, "sm_active": value}],
            }
        )

    model.apply({"type": "run_start", "t": 0.0, "run": rid})
    sample(10.0)  # starting: not training
    model.apply({"type": "phase", "t": 1.0, "run": rid, "name": "first_batch", "edge": "start"})
    sample(50.0)
    sample(70.0)
    model.apply({"type": "phase", "t": 2.0, "run": rid, "name": "profile", "edge": "start"})
    sample(100.0)  # the profiler's steps
    assert model.runs[rid].counters() == {"gpu_util": 99.0, "sm_active": 60.0}
    # What the engine records at the run's end is what a loaded session has (its samples are folded last).
    model.apply(
        {"type": "run_end", "t": 3.0, "run": rid, "status": "ok", "gpu_util": 90.0, "sm_active": 61.0}
    )
    assert model.runs[rid].counters() == {"gpu_util": 90.0, "sm_active": 61.0}


def test_a_live_fold_has_the_counters_of_the_samples(profiled_path: Path) -> None:
    plan = load_session(profiled_path).plan
    model = SessionModel(plan)
    for event in read_events(profiled_path):
        if event["type"] == "run_end":  # the samples alone, as the live screen has them before the run ends
            event = {
                k: v
                for k, v in event.items()
                if k not in ("gpu_util", "sm_active", "tensor_active", "dram_active")
            }
        model.apply(event)
    for run in model.runs.values():
        assert run.counters()["sm_active"] == GPU_COUNTERS[run.spec.framework]["sm_active"]
    table = model.why_table("resnet50")
    assert table is not None and "SM active 62% vs 48%" in table.counters


def test_counters_that_cannot_be_read_are_said_plainly(tmp_path: Path) -> None:
    profile = {(fw, "resnet50"): {} for fw in FRAMEWORKS}
    unreadable = {
        "available": False,
        "source": "",
        "reason": "SM/tensor/DRAM activity unavailable: DCGM is not installed",
    }
    report = build_report(load_session(session(tmp_path / "a", profile=profile, counters=unreadable)))
    line = report.why[0].lines[2]
    assert line.startswith("GPU counters, PyTorch vs tf.keras: NVML utilization ")
    assert line.endswith("; SM, tensor-core and DRAM activity not measured: DCGM is not installed")
    cpu = build_report(load_session(session(tmp_path / "b", profile=profile, gpu=False)))
    assert cpu.why[0].lines[2] == "GPU counters: none (the runs trained on the CPU)"
    assert cpu.why[0].text[0].endswith("no op running 12% vs 10%")  # idle on a CPU: no op running
    old = build_report(load_session(session(tmp_path / "c", profile=profile)))  # no counters event at all
    assert old.why[0].lines[2] == (
        "GPU counters, PyTorch vs tf.keras: SM, tensor-core and DRAM activity not measured: "
        "the session recorded no profiling counters"
    )


# -- sessions without profiles: as before ----------------------------------------------------------------
def test_a_session_without_profiles_has_no_why_anywhere(tmp_path: Path) -> None:
    report = build_report(load_session(session(tmp_path)))
    assert (
        report.why == []
        and report.summary.to_json()["why"] == []
        and report.summary.to_json()["counters"] is None
    )
    assert not any(w["kind"] == "profile" for r in report.summary.rows for w in r.warnings)
    views = {"show": shown(report), "md": written(report, markdown), "html": written(report, htmlreport)}
    for name, text in views.items():
        for words in ("Why", "profile", "where a step goes", "GPU counters", "traces/"):
            assert words not in text, (name, words)
    assert json.loads(written(report, jsonfile))["why"] == []


def test_the_traces_folder_is_the_session_folders() -> None:
    assert why.TRACES_DIR == SessionFolder.TRACES


def test_words_for_milliseconds_and_shares() -> None:
    assert [ms(s) for s in (0.0041, 0.000049, 0.1234, -0.002, 0.0)] == ["4.1", "0.05", "123", "−2.0", "0.00"]
    assert [signed_ms(s) for s in (0.0041, -0.0020, 0.0)] == ["+4.1", "−2.0", "0.00"]
    assert [percent(s) for s in (0.18, 0.03, 0.004, 0.0)] == ["18%", "3%", "0.4%", "0%"]
