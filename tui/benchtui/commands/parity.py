"""``benchtui parity``: each model's parameters and FLOPs per sample as every framework builds it, and
where the two sides are not the same network (nothing is trained, nothing is downloaded)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from benchtui.commands import EXIT_OK, BadInput, say


def _plan(args: argparse.Namespace) -> Any:
    """The plan whose (model, framework) pairs are counted, checked as a run's would be."""
    from benchtui.core.plan.custom import check_sources, read_model_file
    from benchtui.core.plan.plan import Plan, PlanError, models_named
    from benchtui_runners import catalog

    try:
        own = [read_model_file(path) for path in args.model_file]
        # Your own models, after the catalog's --models names (only yours when it names none).
        named = models_named(args.models or ([] if own else ["all"]))
        plan = Plan(
            frameworks=args.frameworks or ["torch", "tensorflow"],
            models=named + [d["name"] for d in own if d["name"] not in named],
            custom_models=own,
            task=args.task or "train",
            seq_len=0 if args.seq_len is None else args.seq_len,
            num_classes=args.num_classes or 1000,
            samples=1,
        )
        plan.register_models()
        plan.batch_sizes = dict.fromkeys(plan.models, 1)
        for item in args.python:
            fw, sep, path = item.partition("=")
            if not sep or not path:
                raise PlanError(f"--python takes FRAMEWORK=INTERPRETER, got {item!r}")
            plan.python[fw] = path
        for definition in own:
            check_sources(definition, set(plan.python))
        if args.jobs is not None and args.jobs < 1:
            raise PlanError(f"--jobs must be a positive whole number, got {args.jobs}")
        # Each model is checked at the size it is counted at: the one asked for, or its own.
        for model in plan.models:
            info = catalog.MODELS.get(model)
            size = args.image_size or (info.native_size if info and info.kind == "image" else 224)
            Plan.from_dict({**plan.to_dict(), "models": [model], "image_size": size}).validate()
    except PlanError as exc:
        raise BadInput(str(exc)) from None
    for fw, path in plan.python.items():
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise BadInput(f"--python {fw}={path}: no executable interpreter there")
    return plan


def table_rows(counts: list[Any], entries: list[dict[str, Any]]) -> list[list[str]]:
    """Model, framework, source, size counted, trainable parameters, FLOPs per sample, differs by."""
    from benchtui.core import fmt
    from benchtui.core.model.analysis import framework_label, model_label
    from benchtui.core.model.parity import PARITY_MARK, count_text, flops_text

    by_model = {e["model"]: e for e in entries}
    rows = []
    for c in counts:
        entry = by_model.get(c.model)
        label = model_label(c.model) + (f" {PARITY_MARK}" if entry and entry["flagged"] else "")
        size = f"{c.tokens} tokens" if c.tokens else f"{c.image_size} px"
        rows.append(
            [
                fmt.clean(label),
                framework_label(c.framework),
                fmt.clean(c.source or c.reason),
                size,
                count_text(c.trainable_params, 4),
                flops_text(c.flops_per_sample, 4),
                _differs(entry),
            ]
        )
    return rows


def _differs(entry: dict[str, Any] | None) -> str:
    """'FLOPs 6.0%, params 0.1%': how far apart the sides are (the largest over the smallest)."""
    if not entry:
        return ""
    parts = [
        f"{name} {entry[key]:.1%}"
        for name, key in (("FLOPs", "flops_diff"), ("params", "params_diff"))
        if entry.get(key) is not None
    ]
    return ", ".join(parts)


HEADER = [
    "Model",
    "Framework",
    "Built by",
    "Counted at",
    "Trainable params",
    "FLOPs / sample",
    "Sides differ by",
]

#: The columns after the model and the framework, as words in a sentence (a row too wide for a table).
RECORD_WORDS = ["built by", "counted at", "trainable params", "FLOPs / sample", "sides differ by"]


def markdown(counts: list[Any], entries: list[dict[str, Any]], task: str) -> str:
    """The parity table as Markdown, then every flagged model's sentence."""
    from benchtui.core.model.parity import PARITY_MARK, PARITY_TOLERANCE

    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    what = "one training step (forward, loss, backward)" if task == "train" else "one forward pass"
    lines = [
        f"FLOPs per sample of {what} at batch 1, counted by each framework from what it runs or "
        "traces (convolution and matmul multiply-adds × 2); trainable parameters as each framework "
        f"reports them. {PARITY_MARK}: the sides differ by more than {PARITY_TOLERANCE:.0%}.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "| " + " | ".join("---" for _ in HEADER) + " |",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table_rows(counts, entries)]
    flagged = [e for e in entries if e["flagged"]]
    if flagged:
        lines += ["", "Not the same network:", ""]
        lines += [f"- {cell(e['text'])}" for e in flagged]
    return "\n".join(lines)


def _longest_word(text: str) -> int:
    """The cells of ``text``'s longest word: the least a column can be without cutting a word."""
    from rich.cells import cell_len

    return max((cell_len(word) for word in text.split()), default=0)


def table_console(natural: int, least: int, file: Any = None) -> tuple[Any, bool]:
    """The console a table of ``natural`` cells wide (its widest cells on one line each) is printed on, and
    whether it fits there as a table at all: every column at least its longest word (``least`` in all).

    A file or a pipe has no width: the table is printed whole, as wide as it is (at least 80 columns, for
    the sentences under it), unless ``COLUMNS`` says a width. A terminal, or ``COLUMNS``, narrower than
    ``least`` gets the rows as lines of words instead, so that no word is ever cut ("Trainab…").
    """
    from rich.console import Console

    console = Console(file=file or sys.stdout)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console = Console(file=file or sys.stdout, width=max(80, natural))
    return console, least <= console.width


def print_table(counts: list[Any], entries: list[dict[str, Any]], file: Any = None) -> None:
    """The parity table on stdout: words wrap at their spaces and are never cut (``table_console``)."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    rows = table_rows(counts, entries)
    # Each column at least its longest word: Rich then wraps a cell at its spaces, never inside a word.
    least = [max([_longest_word(h)] + [_longest_word(r[i]) for r in rows]) for i, h in enumerate(HEADER)]
    widest = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(HEADER)]
    rules = 3 * len(HEADER) + 1  # a space either side of each column, and the rules between
    console, fits = table_console(sum(widest) + rules, sum(least) + rules, file)
    if fits:
        table = Table(title="benchtui parity", title_justify="left", header_style="bold")
        for i, col in enumerate(HEADER):
            table.add_column(col, justify="right" if i in (4, 5) else "left", min_width=least[i])
        for row in rows:
            table.add_row(*(escape(v) for v in row))
        console.print(table)
    else:  # narrower than the table's longest words: a line of words per row, wrapped at its spaces
        console.print("benchtui parity", style="bold", highlight=False, markup=False)
        for row in rows:
            line = Text(f"{row[0]} · {row[1]}: ", style="bold")
            line.append(", ".join(f"{h} {v}" for h, v in zip(RECORD_WORDS, row[2:], strict=True) if v))
            console.print(line, highlight=False)
    for entry in entries:
        if entry["flagged"]:
            console.print(f"[yellow]≠[/] {escape(entry['text'])}")


def cmd_parity(args: argparse.Namespace) -> int:
    from benchtui.core.model.parity import parity_entries
    from benchtui.core.running.parity import count_all

    plan = _plan(args)

    def progress(count: Any, done: int, total: int) -> None:
        what = "counted" if count.ok else count.reason
        say(f"[{done}/{total}] {count.model} · {count.framework}: {what}")

    counts = count_all(plan, args.image_size, jobs=args.jobs or 0, progress=progress)
    entries = parity_entries(counts)
    if args.format == "json":
        data = {"task": plan.task, "counts": [vars(c) for c in counts], "parity": entries}
        json.dump(data, sys.stdout, indent=2, allow_nan=False)
        print()
    elif args.format == "md":
        print(markdown(counts, entries, plan.task))
    else:
        print_table(counts, entries)
    return EXIT_OK
