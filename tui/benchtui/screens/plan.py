"""The plan screen: choose frameworks, models and the protocol, then start (Enter)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, HorizontalGroup, VerticalScroll
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, Checkbox, Footer, Input, Label, Select, SelectionList, Static
from textual.widgets.selection_list import Selection

from benchtui.core.plan.custom import check_sources, read_model_file
from benchtui.core.plan.plan import PRESETS, Plan, PlanError, from_preset
from benchtui_runners import catalog
from benchtui_runners.config import COMPILE_MODES, HEADS, OPTIMIZERS, TASKS
from benchtui_runners.timing import TIMINGS

PRESET_HELP = {
    "study": "study: the 2019 scripts, 7 models, 299 px, 10,000 samples, 5 epochs, 3 runs, Adam, sigmoid head",
    "quick": "quick: about two minutes on a CPU-only machine (ResNet50, 64 px, 2 runs)",
    "modern": "modern: EfficientNetB0, ConvNeXtTiny and ViT-B/16 at 224 px, GPT-2 small over 1024 tokens; "
    "minutes on one GPU",
    "modern-cpu": "modern-cpu: the same kinds of network sized for a CPU (ViT-Ti/16, a 4-layer GPT-2, 64 px, "
    "64 tokens); a few minutes",
}
# Flags in PlanError messages, as the fields of this screen are labelled.
FIELD_NAMES = {
    "--image-size": "Image size",
    "--seq-len": "Seq len",
    "--task": "Task",
    "--samples": "Samples",
    "--epochs": "Epochs",
    "--runs": "Runs",
    "--num-classes": "Classes",
    "--batch-size": "Batch size",
    "--device": "Device",
    "--data": "Data",
    "--compile": "Compile",
    "--timing": "Timing",
    "--optimizer": "Optimizer",
    "--head": "Head",
}
#: The protocol's choices the form shows as drop-downs: plan field -> (label, choices).
CHOICES = {
    "task": ("Task", TASKS),
    "compile": ("Compile", COMPILE_MODES),
    "timing": ("Timing", TIMINGS),
    "optimizer": ("Optimizer", tuple(OPTIMIZERS)),
    "head": ("Head", HEADS),
}


def matches_preset(plan: Plan, name: str) -> bool:
    """Whether ``plan`` still has every value that preset ``name`` sets."""
    preset = from_preset(name)
    return all(
        (plan.batch_size(m) == preset.batch_size(m) for m in plan.models)
        if key == "batch_sizes"
        else getattr(plan, key) == getattr(preset, key)
        for key in PRESETS[name]
    )


def preset_hint(name: str, gpu: bool) -> str:
    hint = PRESET_HELP.get(name, "")
    if name == "study" and not gpu:
        # 42 runs at 299 px and 10,000 samples: hours per run on a CPU.
        hint += "\nNo GPU here: on the CPU the study's protocol takes days. Try quick, or fewer models and samples."
    return hint


def profile_hint(plan: Plan) -> str:
    return (
        f"profile: after the timed epochs, {plan.profile_steps} steps of each run captured with its "
        "framework's own profiler; raw traces in the session's traces/ folder"
    )


@dataclass(frozen=True)
class GpuProbe:
    """What the machine has, found with NVML before the plan screen shows (never a framework import)."""

    names: tuple[str, ...]
    status: str

    @property
    def found(self) -> bool:
        return bool(self.names)


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
    """A form over ``Plan``: presets fill it, Enter validates it and asks the app to start it."""

    BINDINGS = [
        Binding(
            "enter",
            "start",
            "Start",
            id="start-plan",
            priority=True,
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
        default = "study" if probe.found else "quick"
        self.initial = plan or from_preset(default)
        self._filling = False

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
            yield Static(preset_hint(plan.preset, self.probe.found), id="preset-help", classes="hint")
            yield Label("Frameworks", classes="section")
            with HorizontalGroup(id="frameworks"):
                for fw in catalog.FRAMEWORKS:
                    yield Checkbox(
                        catalog.FRAMEWORK_LABELS[fw], fw in plan.frameworks, compact=True, id=f"fw-{fw}"
                    )
            yield Label("Models (space selects)", classes="section")
            yield SelectionList[str](
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
            with HorizontalGroup(classes="field-row"):
                for field, label in (
                    ("image_size", "Image size"),
                    ("seq_len", "Seq len"),
                    ("samples", "Samples"),
                    ("epochs", "Epochs"),
                    ("runs", "Runs"),
                ):
                    yield Label(label, classes="field-label")
                    yield Input(
                        str(getattr(plan, field)), type="integer", compact=True, id=field, classes="number"
                    )
            with HorizontalGroup(classes="field-row"):
                yield Label("Device", classes="field-label")
                devices = [("auto", "auto"), ("cpu", "cpu")] + [
                    (Text(f"cuda:{i} {name}"), f"cuda:{i}") for i, name in enumerate(self.probe.names)
                ]
                known = {value for _, value in devices}
                if plan.device not in known and plan.device != "cuda":
                    devices.append((plan.device, plan.device))
                yield Select(
                    devices,
                    value=plan.device if plan.device in known else "auto",
                    allow_blank=False,
                    compact=True,
                    id="device",
                )
                yield Label("Data", classes="field-label")
                yield Select(
                    [("device", "device"), ("host", "host")],
                    value=plan.data,
                    allow_blank=False,
                    compact=True,
                    id="data",
                )
            yield Static(
                "device: tensors made on the device · host: a NumPy array in host memory", classes="hint"
            )
            with HorizontalGroup(classes="field-row"):
                for field, (label, choices) in CHOICES.items():
                    yield Label(label, classes="field-label")
                    yield Select(
                        [(c, c) for c in choices],
                        value=getattr(plan, field),
                        allow_blank=False,
                        compact=True,
                        id=field,
                        classes="choice",
                    )
            yield Static(
                "task inference: forward only, eval mode, every batch timed (timing step) · compile default: "
                "each framework's own (Keras XLA where it picks it, PyTorch eager) · timing window: one device "
                "sync per ~0.3 s of steps, on every framework · seq len (GPT-2): tokens per sample, 0: the "
                "model's context",
                classes="hint",
            )
            yield Checkbox("Profile (where step time goes)", plan.profile, compact=True, id="profile")
            yield Static(profile_hint(plan), id="profile-help", classes="hint")
            yield Label("Batch size per model", classes="section")
            yield Checkbox(
                "auto: the largest that fits, probed in fresh processes before the runs",
                plan.batch_auto,
                compact=True,
                id="batch-auto",
            )
            with HorizontalGroup(id="batch-sizes"):
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
        yield Static(id="plan-error")
        with HorizontalGroup(id="plan-actions"):
            yield Button("Start (Enter)", id="start", variant="primary", compact=True)
            yield Static("  Tab: next field · space: toggle · ctrl+q: quit", classes="hint")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#plan-error", Static).display = False
        for field in self.query(Input):  # a steady cursor: a blinking one redraws twice a second for ever
            field.cursor_blink = False
        self._show_batch_fields()
        self.query_one("#models", SelectionList).focus()

    # -- form events --------------------------------------------------------------------------
    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "preset" and isinstance(event.value, str) and not self._filling:
            self.fill(from_preset(event.value))
        elif event.select.id == "task" and not self._filling:
            # Latency is what inference is measured by: every batch waited for (on every framework).
            self.query_one("#timing", Select).value = "step" if event.value == "inference" else "window"

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        self._show_batch_fields()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.action_start()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        if event.checkbox.id == "batch-auto":
            self._show_batch_fields()

    def _show_batch_fields(self) -> None:
        chosen = set(self.query_one("#models", SelectionList).selected)
        auto = self.query_one("#batch-auto", Checkbox).value  # the search decides: no sizes to type
        for m in catalog.MODEL_ORDER:
            self.query_one(f"#bsf-{m}").display = m in chosen and not auto

    def fill(self, plan: Plan) -> None:
        """Put a plan's values in the form (a preset was chosen)."""
        self._filling = True
        self.initial = plan
        try:
            for fw in catalog.FRAMEWORKS:
                self.query_one(f"#fw-{fw}", Checkbox).value = fw in plan.frameworks
            models = self.query_one("#models", SelectionList)
            models.deselect_all()
            for m in plan.models:
                models.select(m)
            for field in ("image_size", "seq_len", "samples", "epochs", "runs"):
                self.query_one(f"#{field}", Input).value = str(getattr(plan, field))
            self.query_one("#model-file", Input).value = own_model_file(plan)
            for m in catalog.MODEL_ORDER:
                self.query_one(f"#bs-{m}", Input).value = str(plan.batch_size(m))
            self.query_one("#batch-auto", Checkbox).value = plan.batch_auto
            self.query_one("#profile", Checkbox).value = plan.profile
            self.query_one("#profile-help", Static).update(profile_hint(plan))
            device = self.query_one("#device", Select)
            device.value = plan.device if plan.device in {v for _, v in device._options} else "auto"  # noqa: SLF001
            self.query_one("#data", Select).value = plan.data
            for field in CHOICES:
                self.query_one(f"#{field}", Select).value = getattr(plan, field)
            self.query_one("#preset-help", Static).update(preset_hint(plan.preset, self.probe.found))
            self._show_batch_fields()
        finally:
            self._filling = False

    # -- building the plan ----------------------------------------------------------------------
    def _number(self, widget_id: str, label: str) -> int:
        raw = self.query_one(f"#{widget_id}", Input).value.strip()
        try:
            return int(raw)
        except ValueError:
            raise PlanError(f"{label}: enter a whole number") from None

    def build_plan(self) -> Plan:
        """The plan the form describes, validated (raises PlanError)."""
        # Settings the form does not show (precision, order, ...) come from the preset or plan it started from.
        plan = Plan.from_dict(self.initial.to_dict())
        preset = self.query_one("#preset", Select).value
        plan.preset = preset if isinstance(preset, str) else ""
        plan.frameworks = [fw for fw in catalog.FRAMEWORKS if self.query_one(f"#fw-{fw}", Checkbox).value]
        chosen = set(self.query_one("#models", SelectionList).selected)
        plan.models = [m for m in catalog.MODEL_ORDER if m in chosen]
        plan.custom_models = []
        model_file = self.query_one("#model-file", Input).value.strip()
        if model_file:  # the user's own network, after the catalog's ticked above
            own = read_model_file(model_file)
            plan.custom_models = [own]  # registered by plan.validate()
            plan.models.append(own["name"])
        plan.image_size = self._number("image_size", "Image size")
        plan.seq_len = self._number("seq_len", "Seq len")
        plan.samples = self._number("samples", "Samples")
        plan.epochs = self._number("epochs", "Epochs")
        plan.runs = self._number("runs", "Runs")
        plan.batch_auto = self.query_one("#batch-auto", Checkbox).value
        plan.batch_sizes = (
            {}
            if plan.batch_auto
            else {
                m: self._number(f"bs-{m}", f"Batch size of {catalog.MODELS[m].label}")
                for m in plan.models
                if m in catalog.BUILTIN_MODELS  # your own model's is its model file's
            }
        )
        plan.device = str(self.query_one("#device", Select).value)
        plan.data = str(self.query_one("#data", Select).value)
        plan.profile = self.query_one("#profile", Checkbox).value
        for field in CHOICES:
            value = str(self.query_one(f"#{field}", Select).value)
            if field == "optimizer" and value != plan.optimizer:
                plan.learning_rate = 0.0  # another optimizer: its own default learning rate
            setattr(plan, field, value)
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
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start":
            # Inside a drop-down, Enter opens it or picks an option: let the Select have it.
            node: DOMNode | None = self.app.focused
            while node is not None:
                if isinstance(node, Select):
                    return None
                node = node.parent
        return True

    def action_start(self) -> None:
        try:
            plan = self.build_plan()
        except PlanError as exc:
            self.show_error(user_message(exc))
            return
        self.show_error("")
        self.post_message(self.StartRequested(plan))
