"""The plan screen: choose frameworks, models and the protocol, then start (the Start button or ctrl+r)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from functools import partial

from rich.segment import Segment
from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, HorizontalGroup, ItemGrid, VerticalScroll
from textual.content import Content
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Button, Checkbox, Footer, Input, Label, Select, SelectionList, Static
from textual.widgets.option_list import OptionDoesNotExist
from textual.widgets.selection_list import Selection

from benchtui.core import fmt
from benchtui.core.plan import estimate, sweep
from benchtui.core.plan.custom import check_sources, read_model_file
from benchtui.core.plan.devices import default_preset
from benchtui.core.plan.estimate import cpu_seconds, duration_words, preset_words
from benchtui.core.plan.options import FORM_CHOICES, FORM_LABELS, FORM_NUMBERS, timing_for
from benchtui.core.plan.plan import PRESETS, Plan, PlanError, from_preset
from benchtui_runners import catalog
from benchtui_runners.config import usable_cores

PRESET_HELP = {
    "study": "study: the 2019 scripts, 7 models, 299 px, 10,000 samples, 5 epochs, 3 runs, Adam, sigmoid head",
    # "quick" is worded from the machine's idle cores: ``quick_help``.
    "modern": "modern: EfficientNetB0, ConvNeXtTiny and ViT-B/16 at 224 px, GPT-2 small over 1024 tokens; "
    "minutes on one GPU",
    "modern-cpu": "modern-cpu: the same kinds of network sized for a CPU (ViT-Ti/16, a 4-layer GPT-2, 64 px, "
    "64 tokens); a few minutes",
}
# Flags in PlanError messages, as the fields of this screen are labelled.
FIELD_NAMES = {**FORM_LABELS, "--sweep": "Sweep"}  # a sweep's errors name the field they are about
#: The protocol's choices the form shows as drop-downs: plan field -> (label, choices).
CHOICES = FORM_CHOICES
#: The protocol's counts the form shows as number fields: plan field -> label.
NUMBERS = FORM_NUMBERS
#: The number fields of ``--task generate`` alone (the prompt's tokens and the new ones): shown only then,
#: and then in place of the sequence length (the prompt's is the length).
GENERATE_NUMBERS = ("prompt_len", "new_tokens")
#: The plan's fields this form edits. A plan is a preset's only while all of them, and every value the
#: preset sets, are the preset's. Profiling is not among them: it runs after the timed epochs and
#: changes nothing they measure.
FORM_FIELDS = (
    "frameworks",
    "models",
    *NUMBERS,
    "batch_sizes",
    "batch_auto",
    "data",
    "channels_last",
    *CHOICES,
    "sweep",  # a grid of settings is no preset's
)
#: What each setting does, shown under the settings while it has the focus (widget id -> help).
FIELD_HELP = {
    "task": "task: train (forward, backward and the optimizer's step), or inference: forward only, in eval "
    "mode, every batch timed, or generate (token models): greedy decoding with a key/value cache",
    "image_size": "image size: the side of the square images, in pixels (ViTs: a multiple of the patch)",
    "seq_len": "seq len (GPT-2): tokens per sample; 0: the model's whole context",
    "prompt_len": "prompt len (generate): the prompt's tokens; 0: 128, or half the context where that is less",
    "new_tokens": "new tokens (generate): exactly this many generated per sequence, no early stop; 0: 128, or "
    "what the context leaves",
    "samples": "samples: images (or sequences) in one epoch; every batch is one step",
    "epochs": "epochs: passes over the samples in each run (the first one includes the warm-up)",
    "runs": "runs: fresh processes per framework and model; their spread is the error bars",
    "threads": "threads: CPU threads for every framework's ops; 0: on a CPU, the cores benchtui may use, "
    "the same for every framework; on a GPU, each framework's own choice",
    "device": "device: auto uses the GPU when there is one; cuda:N picks one GPU",
    "data": "data device: tensors made on the device · host: a NumPy array in host memory, fed by each "
    "framework's own input pipeline",
    "precision": "precision: fp32; tf32 (fp32 with TensorFloat-32 matmuls on Ampere and later); amp-fp16 or "
    "amp-bf16: each framework's automatic mixed precision",
    "compile": "compile default: each framework's own (Keras XLA where it picks it, PyTorch eager) · on: XLA / "
    "torch.compile everywhere · off: none anywhere",
    "timing": "timing window: one device sync per ~0.3 s of steps, on every framework · step: a sync after "
    "every step (inference picks it)",
    "optimizer": "optimizer: sgd (lr 0.01, momentum 0.9) or adam (lr 1e-4), each with its own default "
    "learning rate",
    "head": "head: softmax over 1,000 classes, or one sigmoid output with binary cross-entropy (the study's)",
    "order": "order interleaved: runs alternate between frameworks, so drift falls on both · grouped: all "
    "runs of one framework, then the next (the study's)",
    "channels-last": "channels last: PyTorch's NHWC memory format for images (Keras is NHWC already)",
}
SETTINGS_HELP = "what each setting does shows here while it has the focus (Tab moves between them)"

WARN_S = 3600.0  # a plan this long on the CPU gets a warning under the preset (hours, days)
DAY = 86400.0


def runs_on_gpu(plan: Plan, gpu: bool) -> bool:
    return plan.device.startswith("cuda") or (plan.device == "auto" and gpu)


def size_refusals(plan: Plan) -> dict[str, str]:
    """The plan's models that cannot run at its image size, each with why (as ``Plan.validate`` refuses
    them): they are left out of the plan's count of runs and of its estimate."""
    out = {}
    for m in plan.models:
        info = catalog.MODELS.get(m)
        if info is None or info.kind != "image":
            continue
        if plan.image_size < info.min_image_size:
            out[m] = f"{info.label} needs at least {info.min_image_size} px"
        elif info.patch_size and plan.image_size % info.patch_size:
            out[m] = f"{info.label} needs a multiple of {info.patch_size} px"
    return out


def runnable(plan: Plan) -> Plan:
    """``plan`` without the models refused at its image size (a copy; the plan itself when none is)."""
    refused = size_refusals(plan)
    if not refused:
        return plan
    return dataclasses.replace(plan, models=[m for m in plan.models if m not in refused])


def cores_words(cores: float, of: int | None = None) -> str:
    """The cores an estimate is made on: 'with 0.4 of 2 CPU cores idle' (``of``: the machine's), 'on 2 idle
    CPU cores'."""
    n = f"{cores:.0f}" if abs(cores - round(cores)) < 0.05 and cores >= 0.95 else f"{cores:.1f}"
    if of:
        return f"with {n} of {of} CPU core{'' if of == 1 else 's'} idle"
    return f"on {n} idle CPU core{'' if n == '1' else 's'}"


def long_plan_warning(plan: Plan, gpu: bool, cpus: float, of: int | None = None) -> str:
    """A warning for a plan that takes hours or more on the CPU ('' otherwise, and on a GPU): about how
    long (``estimate.cpu_seconds``: the models' FLOPs at a generous rate, on ``cpus`` idle cores), and
    what to cut."""
    if runs_on_gpu(plan, gpu):
        return ""
    seconds = cpu_seconds(runnable(plan), cpus)
    if seconds < WARN_S:
        return ""
    on = f"on {plural(plan.threads, 'thread')}" if plan.threads else cores_words(cpus, of)
    where = "No GPU here: on the CPU" if not gpu else "On the CPU"
    cut = "Try fewer runs or samples" if plan.preset == "quick" else "Try quick, or fewer models and samples"
    return (
        f"{where} this plan takes {'days' if seconds >= DAY else 'hours'}: likely {duration_words(seconds)} "
        f"or more {on}. {cut}."
    )


#: The plan screen's counts have their thousands apart: '1,024 samples'.
plural = partial(fmt.plural, grouped=True)


def custom_description(
    plan: Plan, gpu: bool, cpus: float, how_long: bool = True, of: int | None = None
) -> str:
    """What a plan of the user's own does, in one line: its runs (of the models that can run at its size,
    each a framework has), their size, where, and on a CPU about how long (``how_long``); the models
    refused at its size are named, not counted."""
    refused = size_refusals(plan)
    able = runnable(plan)
    grid = plan.points()
    # A sweep's cells whose axis changes nothing for them share another point's runs: counted once.
    pairs = sum(
        len({plan.effective(p, fw, m) for p in grid})
        for m in able.models
        for fw in able.frameworks
        if catalog.available(fw, m)[0]
    )
    runs = pairs * plan.runs * len(plan.device_counts())
    kinds = {catalog.MODELS[m].kind if m in catalog.MODELS else "image" for m in able.models}
    size = [f" at {plan.image_size} px"] if kinds - {"tokens"} else []
    if "tokens" in kinds and plan.task == "generate":  # issue 34: a prompt given new tokens
        lengths = {plan.generate_lengths(m) for m in able.models if m in catalog.MODELS}
        size += [f" with a {p:,}-token prompt + {n:,} new tokens" for p, n in sorted(lengths)]
    elif "tokens" in kinds:
        size.append(f" over {plan.seq_len:,} tokens" if plan.seq_len else " over the whole context")
    points = f" × {plural(len(grid), 'point')}" if plan.sweep else ""
    text = (
        f"custom: {plural(runs, 'run')} ({plural(len(able.frameworks), 'framework')} × "
        f"{plural(len(able.models), 'model')}{points} × {plan.runs}), {plural(plan.epochs, 'epoch')} of "
        f"{plural(plan.samples, 'sample')}{','.join(size)}"
    )
    if refused:
        text += f"; not counted: {', '.join(refused.values())}"
    if runs_on_gpu(plan, gpu):
        return text + "; on the GPU"
    if not how_long:  # the warning under it says how long, and on how many cores
        return text
    seconds = cpu_seconds(able, cpus)
    on = f"on {plural(plan.threads, 'thread')}" if plan.threads else cores_words(cpus, of)
    how = "a minute or less" if seconds < 60 else f"likely {duration_words(seconds)} or more"
    return f"{text}; {how} {on}"


def quick_help(cpus: float, of: int | None = None) -> str:
    """The quick preset in a line: how long on this machine's idle cores (``estimate.preset_words``), and
    what it runs."""
    plan = from_preset("quick")
    models = ", ".join(catalog.MODELS[m].label if m in catalog.MODELS else m for m in plan.models)
    return (
        f"quick: {preset_words('quick', cpus)} {cores_words(cpus, of)} ({models}, {plan.image_size} px, "
        f"{plural(plan.runs, 'run')})"
    )


def plan_hint(plan: Plan, gpu: bool, cpus: float, of: int | None = None) -> Text:
    """The line under the preset: the preset's description, or the plan's own, and a warning when long;
    estimated on ``cpus`` idle cores (of the ``of`` this machine lets runs use)."""
    warning = long_plan_warning(plan, gpu, cpus, of)  # says how long itself
    described = quick_help(cpus, of) if plan.preset == "quick" else PRESET_HELP.get(plan.preset)
    text = Text(described or custom_description(plan, gpu, cpus, how_long=not warning, of=of))
    if warning:
        text.append("\n" + warning, style="bold yellow")
    return text


def preset_hint(name: str, gpu: bool, cpus: float = 2) -> str:
    """The hint preset ``name`` gets as it is, on a machine with or without a GPU."""
    return plan_hint(from_preset(name), gpu, cpus).plain


def matches_preset(plan: Plan, name: str) -> bool:
    """Whether ``plan`` still has every value that preset ``name`` sets, and its defaults for the rest
    of what the form edits."""
    preset = from_preset(name)
    return all(
        (plan.batch_size(m) == preset.batch_size(m) for m in plan.models)
        if key == "batch_sizes"
        else getattr(plan, key) == getattr(preset, key)
        for key in dict.fromkeys([*PRESETS[name], *FORM_FIELDS])
    )


def profile_hint(plan: Plan) -> str:
    return (
        f"profile: after the timed epochs, {plan.profile_steps} steps of each run captured with its "
        "framework's own profiler; raw traces in the session's traces/ folder"
    )


#: The axes the sweep field takes (``settings`` is the "Best vs best" box).
SWEEP_AXES = tuple(a for a in sweep.AXES if a != "settings")
SWEEP_PLACEHOLDER = f"e.g. batch=4,8; channels-last=off,on · axes: {', '.join(SWEEP_AXES)}"
BEST = "settings"  # the axis --best sweeps
BEST_VALUES = list(sweep.SETTINGS)
SWEEP_HELP = (
    "AXIS=V1,V2 parts apart with ';': every combination of the values is a point, and every (framework, "
    "model, point) a cell with its own runs and verdict; none: one point, the settings above"
)


def sweep_text(plan: Plan) -> str:
    """A plan's sweep as the sweep field has it ('batch=4,8; channels-last=off,on'), without --best's axis."""
    return "; ".join(f"{axis}={','.join(values)}" for axis, values in plan.sweep.items() if axis != BEST)


def read_sweep(text: str, best: bool) -> dict[str, list[str]]:
    """The sweep field's text (';'-separated AXIS=V1,V2 parts) and the --best box as a plan's ``sweep``
    (PlanError: one line, as ``--sweep`` says it)."""
    parsed = sweep.parse_sweeps(part for part in text.split(";") if part.strip())
    if best and BEST not in parsed:
        parsed[BEST] = list(BEST_VALUES)
    return parsed


def sweep_line(plan: Plan, gpu: bool, cores: float) -> str:
    """The sweep's size and rough duration (``estimate.sweep_words``) of the runs that can run; '' without a
    sweep."""
    return estimate.sweep_words(runnable(plan), cores, gpu=runs_on_gpu(plan, gpu))


@dataclass(frozen=True)
class GpuProbe:
    """What the machine has, found with NVML before the plan screen shows (never a framework import)."""

    names: tuple[str, ...]
    status: str
    cpus: int = field(default_factory=usable_cores)  # the cores runs may use (for a plan's rough duration)
    #: Measure the cores other processes leave idle when the plan screen opens (in a thread): a CPU
    #: plan's threads, and so its estimate, come from them. Off, the estimate takes ``cpus`` as idle
    #: (the tests' probes: a figure that does not depend on the machine's load).
    measure_idle: bool = False

    @property
    def found(self) -> bool:
        return bool(self.names)


# -- boxes that say whether they are ticked ---------------------------------------------------------
# Textual draws ticked and unticked boxes with the same glyph, in two close colours. Here an unticked
# box is empty and a ticked one holds the X (app.tcss colours it), which reads in any colour scheme.
EMPTY_BOX = " "


class Tick(Checkbox):
    """A checkbox whose box is empty until it is ticked."""

    def render(self) -> Content:
        # The box is drawn from BUTTON_INNER at each render: this one's, for the value it has now.
        self.BUTTON_INNER = Checkbox.BUTTON_INNER if self.value else EMPTY_BOX
        return super().render()


class ModelList(SelectionList[str]):
    """The models to run: the boxes of those not chosen are empty, as ``Tick``'s are."""

    def render_line(self, y: int) -> Strip:
        line = super().render_line(y)
        try:
            selection = self.get_option_at_index(self.scroll_offset.y + y)
        except OptionDoesNotExist:
            return line
        segments = list(line)
        if (
            isinstance(selection, Selection)
            and selection.value not in self.selected
            and len(segments) > 1
            and segments[1].text == Checkbox.BUTTON_INNER
        ):
            segments[1] = Segment(EMPTY_BOX, segments[1].style)
            return Strip(segments, line.cell_length)
        return line


def model_prompt(model: str) -> Text:
    """A model's line in the list: which frameworks have it, and what it needs."""
    info = catalog.MODELS[model]
    have = [catalog.FRAMEWORK_LABELS[fw] for fw in catalog.FRAMEWORKS if catalog.available(fw, model)[0]]
    text = Text()
    text.append(f"{info.label:<18}", style="bold")
    if len(have) == len(catalog.FRAMEWORKS):
        text.append("all frameworks")
    else:
        text.append(", ".join(have) + " only", style="yellow")
    if info.kind == "tokens":
        text.append(f" · tokens ≤{info.context:,}", style="dim")
    elif info.patch_size:
        text.append(f" · ≥{info.min_image_size} px, a multiple of {info.patch_size}", style="dim")
    else:
        text.append(f" · ≥{info.min_image_size} px", style="dim")
    return text


def own_model_file(plan: Plan) -> str:
    """The model file of the plan's own model ('' when it has none, or was not read from a file)."""
    return next((str(d.get("file") or "") for d in plan.custom_models if isinstance(d, dict)), "")


def user_message(error: PlanError) -> str:
    message = str(error)
    for flag, name in FIELD_NAMES.items():
        message = message.replace(flag, name)
    return message


class PlanScreen(Screen):
    """A form over ``Plan``: presets fill it; the Start button or ctrl+r validates it and asks the app to
    start it. Enter in a field never starts it (a number typed and confirmed is not a go)."""

    BINDINGS = [
        Binding(
            "ctrl+r",
            "start",
            "Start",
            id="start-plan",
            priority=True,  # whatever has the focus: an Input takes no ctrl+r of its own
            tooltip="Validate the plan and start its runs",
        ),
        Binding(
            "ctrl+o",
            "sessions",
            "Sessions",
            id="open-sessions",
            tooltip="Browse, replay and export the sessions saved here",
        ),
    ]

    class StartRequested(Message):
        """The user asked to run this (validated) plan."""

        def __init__(self, plan: Plan) -> None:
            super().__init__()
            self.plan = plan

    class SessionsRequested(Message):
        """The user asked for the saved sessions."""

    def action_sessions(self) -> None:
        self.post_message(self.SessionsRequested())

    def __init__(self, plan: Plan | None, probe: GpuProbe) -> None:
        super().__init__()
        self.probe = probe
        default = default_preset(probe.found)  # the one decision: `benchtui run` with no plan makes it too
        self.initial = plan or from_preset(default)
        # The preset the form started from (chosen, or the plan's): the label returns to it when edits
        # bring the form back to its values.
        self.origin = self.initial.preset if self.initial.preset in PRESETS else ""
        # The cores an estimate is made on: the idle ones once measured (``probe.measure_idle``).
        self.cores: float = float(probe.cpus)
        self.measured = False

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        plan = self.initial
        gpu = (
            f"GPU: {', '.join(self.probe.names)}"
            if self.probe.found
            else f"No NVIDIA GPU found, so runs go on the CPU ({self.probe.status})"
        )
        yield Static(
            Text.assemble(("benchtui ", "bold"), "· plan a benchmark\n", (gpu, "dim")), id="plan-title"
        )
        with VerticalScroll(id="plan-form"):
            with HorizontalGroup(classes="field-row"):
                yield Label("Preset", classes="field-label")
                yield Select(
                    [(name, name) for name in PRESETS],
                    value=plan.preset if plan.preset in PRESETS else Select.NULL,
                    prompt="custom",
                    allow_blank=True,
                    compact=True,
                    id="preset",
                )
            yield Static(id="preset-help", classes="hint")
            yield Label("Frameworks", classes="section")
            with HorizontalGroup(id="frameworks"):
                for fw in catalog.FRAMEWORKS:
                    yield Tick(
                        catalog.FRAMEWORK_LABELS[fw], fw in plan.frameworks, compact=True, id=f"fw-{fw}"
                    )
            yield Label("Models (space selects)", classes="section")
            yield ModelList(
                *(Selection(model_prompt(m), m, m in plan.models) for m in catalog.MODEL_ORDER),
                compact=True,
                id="models",
            )
            with HorizontalGroup(classes="field-row"):
                yield Label("Your model", classes="field-label")
                yield Input(
                    own_model_file(plan),
                    placeholder="a model file (TOML or JSON): your own network in each framework",
                    compact=True,
                    id="model-file",
                )
            yield Static(
                'a model file names a builder per framework (torch = "mypkg.nets:build_torch"), its input '
                "and batch size; see the README. It is trained with the models ticked above.",
                classes="hint",
            )
            yield Label("Protocol", classes="section")
            with ItemGrid(id="settings", min_column_width=30):  # two columns on 80, three on 120
                yield from self._settings(plan)
            yield Static(SETTINGS_HELP, id="field-help", classes="hint")
            yield Tick("Profile (where step time goes)", plan.profile, compact=True, id="profile")
            yield Static(profile_hint(plan), id="profile-help", classes="hint")
            yield Label("Sweep (a grid of settings: every point a cell)", classes="section")
            with HorizontalGroup(classes="setting", id="sweep-row"):
                yield Label("Sweep", classes="field-label")
                yield Input(sweep_text(plan), placeholder=SWEEP_PLACEHOLDER, compact=True, id="sweep")
            yield Tick(
                "Best vs best (--best): each framework also at its recommended settings",
                BEST in plan.sweep,
                compact=True,
                id="best",
            )
            yield Static(id="sweep-help", classes="hint")
            yield Label("Batch size per model", classes="section")
            yield Tick(
                "auto: the largest that fits, probed in fresh processes before the runs",
                plan.batch_auto,
                compact=True,
                id="batch-auto",
            )
            with ItemGrid(id="batch-sizes", min_column_width=28):
                for m in catalog.MODEL_ORDER:
                    with Horizontal(classes="batch-field", id=f"bsf-{m}"):
                        yield Label(catalog.MODELS[m].label, classes="batch-label")
                        yield Input(
                            str(plan.batch_size(m)),
                            type="integer",
                            compact=True,
                            id=f"bs-{m}",
                            classes="number",
                        )
            yield Static(
                "the sweep sets each point's batch, for every model", id="batch-swept", classes="hint"
            )
        yield Static(id="plan-error")
        with HorizontalGroup(id="plan-actions"):
            yield Button("Start (ctrl+r)", id="start", variant="primary", compact=True)
            yield Static("  Tab: next · space: tick · Enter: open a list · ctrl+q: quit", classes="hint")
        yield Footer()

    def _settings(self, plan: Plan) -> ComposeResult:
        """The protocol's settings, a label and a field each, for a grid as wide as the screen allows."""

        def choice(name: str) -> ComposeResult:
            label, choices = CHOICES[name]
            with HorizontalGroup(classes="setting"):
                yield Label(label, classes="field-label")
                yield Select(
                    [(c, c) for c in choices],
                    value=getattr(plan, name),
                    allow_blank=False,
                    compact=True,
                    id=name,
                )

        def number(name: str) -> ComposeResult:
            with HorizontalGroup(classes="setting", id=f"setting-{name}"):
                yield Label(NUMBERS[name], classes="field-label")
                yield Input(str(getattr(plan, name)), type="integer", compact=True, id=name, classes="number")

        yield from choice("task")
        yield from number("image_size")
        yield from number("seq_len")
        for name in GENERATE_NUMBERS:  # --task generate's (issue 34): shown while the task is generate
            if name in NUMBERS:
                yield from number(name)
        yield from number("samples")
        yield from number("epochs")
        yield from number("runs")
        with HorizontalGroup(classes="setting"):
            yield Label("Device", classes="field-label")
            devices = [("auto", "auto"), ("cpu", "cpu")] + [
                (Text(f"cuda:{i} {name}"), f"cuda:{i}") for i, name in enumerate(self.probe.names)
            ]
            known = {value for _, value in devices}
            if plan.device not in known and plan.device != "cuda":
                devices.append((plan.device, plan.device))
                known.add(plan.device)
            yield Select(
                devices,
                value=plan.device if plan.device in known else "auto",
                allow_blank=False,
                compact=True,
                id="device",
                classes="-gpus" if self.probe.found else "",  # room for the GPUs' names
            )
        with HorizontalGroup(classes="setting"):
            yield Label("Data", classes="field-label")
            yield Select(
                [(p, p) for p in ("device", "host")],
                value=plan.data,
                allow_blank=False,
                compact=True,
                id="data",
            )
        yield from number("threads")
        yield from choice("precision")
        yield from choice("compile")
        with HorizontalGroup(classes="setting"):
            yield Tick("Channels last", plan.channels_last, compact=True, id="channels-last")
        yield from choice("optimizer")
        yield from choice("head")
        yield from choice("timing")
        yield from choice("order")

    def on_mount(self) -> None:
        self.query_one("#plan-error", Static).display = False
        for widget in self.query(Input):  # a steady cursor: a blinking one redraws twice a second for ever
            widget.cursor_blink = False
        self._show_batch_fields()
        self._show_task_fields()
        self._show_preset()
        self.query_one("#preset", Select).focus()  # the first thing a user changes
        if self.probe.measure_idle:
            self.measure_idle()

    @work(thread=True, exclusive=True, group="idle-cores")
    def measure_idle(self) -> None:
        """The cores other processes leave idle (about a second, in a thread): what the estimates use."""
        from benchtui.core.plan import threads

        idle = threads.measure_idle().get("idle_cores")
        if isinstance(idle, (int, float)):
            self.app.call_from_thread(self._set_cores, float(idle))

    def _set_cores(self, cores: float) -> None:
        if self.is_mounted:
            self.cores, self.measured = cores, True
            self._show_preset()

    # -- form events --------------------------------------------------------------------------
    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "preset":
            if isinstance(event.value, str):
                self.fill(from_preset(event.value))
            else:  # "custom" chosen: the form's values stay, no preset is claimed
                self.origin = ""
                self._show_preset()
            return
        if event.select.id == "task":
            # --timing's default follows the task (inference: every batch waited for, on every framework).
            with self.prevent(Select.Changed):
                self.query_one("#timing", Select).value = timing_for(str(event.value))
            self._show_task_fields()
        self._show_preset()

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        self._show_batch_fields()
        self._show_preset()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "sweep":
            self._show_batch_fields()
        self._show_preset()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        if event.checkbox.id == "batch-auto":
            self._show_batch_fields()
        self._show_preset()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Under the settings: what the focused one does."""
        node: DOMNode | None = event.widget
        while node is not None and node.id not in FIELD_HELP:
            node = node.parent
        self.query_one("#field-help", Static).update(
            FIELD_HELP[node.id] if node and node.id else SETTINGS_HELP
        )

    def _batch_swept(self) -> bool:
        """Whether the sweep field sets the batch (each point's for every model: no sizes to type)."""
        try:
            return "batch" in self._read_sweep()
        except PlanError:  # half typed: the fields stay as they were
            return not self.query_one("#batch-sizes").display

    def _show_batch_fields(self) -> None:
        chosen = set(self.query_one("#models", SelectionList).selected)
        auto = self.query_one("#batch-auto", Checkbox).value  # the search decides: no sizes to type
        swept = self._batch_swept()
        self.query_one("#batch-sizes").display = not swept
        self.query_one("#batch-swept").display = swept
        for m in catalog.MODEL_ORDER:
            self.query_one(f"#bsf-{m}").display = m in chosen and not auto

    def _show_task_fields(self) -> None:
        """The prompt and new tokens while the task is generate, the sequence length otherwise."""
        generate = self.query_one("#task", Select).value == "generate"
        self.query_one("#setting-seq_len").display = not generate
        for name in GENERATE_NUMBERS:
            if name in NUMBERS:
                self.query_one(f"#setting-{name}").display = generate

    def _show_preset(self) -> None:
        """The preset's label and the hint under it, as the form now stands: the preset's while the form
        holds its values, else "custom" with a description of the plan's own; a warning when it is long."""
        try:
            plan = self._read_form(own_model=False, with_sweep=False)
        except PlanError as exc:  # a field half typed: the label and the hint wait for a whole number
            if self.query_one("#plan-error", Static).display:
                self.show_error(user_message(exc))  # an error shown is the form's error now
            return
        help_line = self.query_one("#sweep-help", Static)
        try:
            plan.sweep = self._read_sweep()
        except PlanError as exc:  # said under the field as it is typed; at Start, where every error is
            help_line.update(Text(user_message(exc), style="yellow"))
        else:
            help_line.update(sweep_line(plan, self.probe.found, self.cores) if plan.sweep else SWEEP_HELP)
        own = bool(self.query_one("#model-file", Input).value.strip())  # your model: never a preset's
        plan.preset = self.origin if self.origin and not own and matches_preset(plan, self.origin) else ""
        preset = self.query_one("#preset", Select)
        if preset.value != (plan.preset or Select.NULL):
            with self.prevent(Select.Changed):  # a label that follows the form, not a preset chosen
                preset.value = plan.preset or Select.NULL
        of = self.probe.cpus if self.measured else None  # measured: "with 0.4 of 2 CPU cores idle"
        self.query_one("#preset-help", Static).update(plan_hint(plan, self.probe.found, self.cores, of))
        if self.query_one("#plan-error", Static).display:
            self._recheck()

    def _recheck(self) -> None:
        """While an error is shown: the form's error now (or none, and the error goes), as it is edited."""
        try:
            plan = self._read_form()
            plan.validate()
        except PlanError as exc:
            self.show_error(user_message(exc))
            return
        self.show_error("")

    def fill(self, plan: Plan) -> None:
        """Put a plan's values in the form (a preset was chosen)."""
        self.initial = plan
        self.origin = plan.preset if plan.preset in PRESETS else ""
        # The form's own events would undo parts of the plan (the task sets the timing): none while filling.
        with self.prevent(Select.Changed, Input.Changed, Checkbox.Changed, SelectionList.SelectedChanged):
            for fw in catalog.FRAMEWORKS:
                self.query_one(f"#fw-{fw}", Checkbox).value = fw in plan.frameworks
            models = self.query_one("#models", SelectionList)
            models.deselect_all()
            for m in plan.models:
                models.select(m)
            for name in NUMBERS:
                self.query_one(f"#{name}", Input).value = str(getattr(plan, name))
            self.query_one("#model-file", Input).value = own_model_file(plan)
            for m in catalog.MODEL_ORDER:
                self.query_one(f"#bs-{m}", Input).value = str(plan.batch_size(m))
            self.query_one("#batch-auto", Checkbox).value = plan.batch_auto
            self.query_one("#profile", Checkbox).value = plan.profile
            self.query_one("#channels-last", Checkbox).value = plan.channels_last
            self.query_one("#sweep", Input).value = sweep_text(plan)
            self.query_one("#best", Checkbox).value = BEST in plan.sweep
            self.query_one("#profile-help", Static).update(profile_hint(plan))
            device = self.query_one("#device", Select)
            device.value = plan.device if plan.device in {v for _, v in device._options} else "auto"
            self.query_one("#data", Select).value = plan.data
            for name in CHOICES:
                self.query_one(f"#{name}", Select).value = getattr(plan, name)
        self._show_batch_fields()
        self._show_task_fields()
        self._show_preset()

    # -- building the plan ----------------------------------------------------------------------
    def _number(self, widget_id: str, label: str) -> int:
        raw = self.query_one(f"#{widget_id}", Input).value.strip()
        try:
            return int(raw)
        except ValueError:
            raise PlanError(f"{label}: enter a whole number") from None

    def _read_sweep(self) -> dict[str, list[str]]:
        return read_sweep(self.query_one("#sweep", Input).value, self.query_one("#best", Checkbox).value)

    def _read_form(self, own_model: bool = True, with_sweep: bool = True) -> Plan:
        """The plan the form describes, not yet validated; ``own_model``: with the model file's network;
        ``with_sweep``: with the sweep field's grid (else none)."""
        # Settings the form does not show (the learning rate, shuffling, ...) come from the preset or
        # plan it started from.
        plan = Plan.from_dict(self.initial.to_dict())
        preset = self.query_one("#preset", Select).value
        plan.preset = preset if isinstance(preset, str) else ""
        plan.frameworks = [fw for fw in catalog.FRAMEWORKS if self.query_one(f"#fw-{fw}", Checkbox).value]
        chosen = set(self.query_one("#models", SelectionList).selected)
        plan.models = [m for m in catalog.MODEL_ORDER if m in chosen]
        plan.custom_models = []
        model_file = self.query_one("#model-file", Input).value.strip()
        if model_file and own_model:  # the user's own network, after the catalog's ticked above
            own = read_model_file(model_file)
            plan.custom_models = [own]  # registered by plan.validate()
            plan.models.append(own["name"])
        for name, label in NUMBERS.items():
            setattr(plan, name, self._number(name, label))
        plan.batch_auto = self.query_one("#batch-auto", Checkbox).value
        # A batch sweep sets every point's batch: the sizes it hides keep the plan's where not whole numbers.
        swept = with_sweep and not self.query_one("#batch-sizes").display
        plan.batch_sizes = (
            {}
            if plan.batch_auto
            else {
                m: self._number(f"bs-{m}", f"Batch size of {catalog.MODELS[m].label}")
                if not swept or self.query_one(f"#bs-{m}", Input).value.strip().isdigit()
                else self.initial.batch_size(m)
                for m in plan.models
                if m in catalog.BUILTIN_MODELS  # your own model's is its model file's
            }
        )
        plan.device = str(self.query_one("#device", Select).value)
        plan.data = str(self.query_one("#data", Select).value)
        plan.profile = self.query_one("#profile", Checkbox).value
        plan.channels_last = self.query_one("#channels-last", Checkbox).value
        plan.sweep = self._read_sweep() if with_sweep else {}
        if "devices" in plan.sweep:  # a scaling session, as --sweep devices makes it: its largest count
            counts = sorted({int(v) for v in plan.sweep["devices"]})
            plan.devices, plan.device_ids, plan.scaling = counts[-1], [], len(counts) > 1
        for name in CHOICES:
            value = str(self.query_one(f"#{name}", Select).value)
            if name == "optimizer" and value != plan.optimizer:
                plan.learning_rate = 0.0  # another optimizer: its own default learning rate
            setattr(plan, name, value)
        return plan

    def build_plan(self) -> Plan:
        """The plan the form describes, validated (raises PlanError)."""
        plan = self._read_form()
        plan.validate()
        for own in plan.custom_models:
            check_sources(own, set(plan.python))
        if plan.preset and not matches_preset(plan, plan.preset):
            plan.preset = ""  # edited after choosing a preset: the session must not claim it
        return plan

    def show_error(self, message: str) -> None:
        error = self.query_one("#plan-error", Static)
        error.update(Text(message, style="bold red"))
        error.display = bool(message)

    # -- actions ------------------------------------------------------------------------------
    def action_start(self) -> None:
        try:
            plan = self.build_plan()
        except PlanError as exc:
            self.show_error(user_message(exc))
            return
        self.show_error("")
        self.post_message(self.StartRequested(plan))
