"""Your network: a user's own model in both frameworks, from a model file or ``--model-def``.

A tiny user package is written to a temporary folder: the same small CNN in PyTorch and Keras, an
MLP on tensors (its Keras side a subclassed model with no Input, its own loss and optimizer), a
token model, and builders that go wrong in each way the issue names. The plan-time checks run in
this process (they import nothing of the user's); the runs are real runner processes.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from benchtui.core.plan.custom import check_sources, from_flags, read_model_file
from benchtui.core.plan.plan import Plan, PlanError
from benchtui_runners import catalog
from support import benchtui, only_session, read_events, run_runner

CNN = '''
"""The same small CNN in PyTorch and Keras: 3x3 convolutions of 8 and 16 channels, pooled, dense."""


def build_torch(input_shape, num_classes):
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(input_shape[0], 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 16, 3, padding=1, stride=2),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, num_classes),
    )


def build_keras(input_shape, num_classes):
    import keras
    from keras import layers

    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            layers.Conv2D(8, 3, padding="same", activation="relu"),
            layers.Conv2D(16, 3, padding="same", strides=2, activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dense(num_classes),
        ]
    )
'''

MLP = '''
"""An MLP on float tensors: builders that take one config dict; the Keras side is subclassed."""


def build_torch(config):
    from torch import nn

    (width,) = config["input_shape"]
    return nn.Sequential(nn.Linear(width, 32), nn.ReLU(), nn.Linear(32, config["num_classes"]))


def build_keras(config):
    import keras

    class MLP(keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = keras.layers.Dense(32, activation="relu")
            self.out = keras.layers.Dense(config["num_classes"])

        def call(self, x):
            return self.out(self.hidden(x))

    return MLP()


def torch_loss(outputs, targets):
    import torch.nn.functional as F

    return F.cross_entropy(outputs, targets, label_smoothing=0.1)


def keras_loss(y_true, y_pred):
    import keras

    return keras.losses.sparse_categorical_crossentropy(y_true, y_pred, from_logits=True)
'''

LM = '''
"""A token model: embedding, then logits over the vocabulary at every position."""


def build_torch(input_shape, num_classes):
    from torch import nn

    return nn.Sequential(nn.Embedding(num_classes, 16), nn.Linear(16, num_classes))
'''

BROKEN = '''
"""Builders that go wrong."""


def raises(input_shape, num_classes):
    raise RuntimeError("this network needs a GPU")


def wrong_type(input_shape, num_classes):
    return {"not": "a model"}


def rejects(input_shape, num_classes):
    from torch import nn

    return nn.Sequential(nn.Flatten(), nn.Linear(7, num_classes))  # expects 7 features


def takes_three(a, b, c):
    return None
'''

IMPORT_FAILS = """
raise ImportError("No module named 'apex'")


def build(input_shape, num_classes):
    return None
"""


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A user's folder: a package ``usernets`` with the models above, and a model file beside it."""
    root = tmp_path / "work"
    pkg = root / "usernets"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for name, text in (
        ("cnn", CNN),
        ("mlp", MLP),
        ("lm", LM),
        ("broken", BROKEN),
        ("needs_apex", IMPORT_FAILS),
    ):
        (pkg / f"{name}.py").write_text(textwrap.dedent(text))
    (root / "cnn.toml").write_text(
        textwrap.dedent(
            """
            name = "tinycnn"
            label = "Tiny CNN"
            input = "image"
            batch_size = 4

            [builders]
            torch = "usernets.cnn:build_torch"
            keras = "usernets.cnn:build_keras"
            """
        )
    )
    return root


def definition(root: Path, **fields: Any) -> dict[str, Any]:
    return catalog.check_definition({"paths": [str(root)], **fields})


# -- the definition, checked without importing anything ---------------------------------------
@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"name": "resnet50", "builders": {"torch": "a:b"}}, "taken by benchtui's catalog"),
        ({"name": "all", "builders": {"torch": "a:b"}}, "taken by benchtui's catalog"),
        ({"name": "../x", "builders": {"torch": "a:b"}}, "letters, digits"),
        ({"name": "x", "builders": {"torch": "a.b"}}, "is not MODULE:FUNCTION"),
        ({"name": "x", "builders": {"mxnet": "a:b"}}, "unknown framework 'mxnet'"),
        ({"name": "x", "builders": {}}, "no builders"),
        ({"name": "x", "input": "tensor", "builders": {"torch": "a:b"}}, "needs shape"),
        ({"name": "x", "input": "tensor", "shape": [0], "builders": {"torch": "a:b"}}, "needs shape"),
        (
            {"name": "x", "input": "image", "shape": [3], "builders": {"torch": "a:b"}},
            "shape is for a tensor",
        ),
        ({"name": "x", "input": "tokens", "builders": {"torch": "a:b"}}, "needs vocab"),
        ({"name": "x", "input": "audio", "builders": {"torch": "a:b"}}, "choose image, tokens or tensor"),
        ({"name": "x", "builder": {"torch": "a:b"}}, "unknown field 'builder'"),
        ({"name": "x", "builders": {"torch": "a:b"}, "batch_size": 0}, "whole numbers"),
        ({"name": "x", "builders": {"torch": "a:b"}, "losses": {"torch": 3}}, "is not MODULE:FUNCTION"),
    ],
)
def test_a_definition_that_cannot_run_is_one_line(raw: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        catalog.check_definition(raw)
    assert "\n" not in str(caught.value)


def test_registered_model_is_known_by_name_and_unavailable_where_it_has_no_builder() -> None:
    info = catalog.register(
        {"name": "reg-test", "input": "tensor", "shape": [4], "builders": {"keras": "m:f"}}
    )
    assert catalog.MODELS["reg-test"] is info and info.kind == "tensor" and info.group == "custom"
    assert "reg-test" not in catalog.MODEL_ORDER and "reg-test" not in catalog.BUILTIN_MODELS
    assert catalog.available("keras-jax", "reg-test") == (True, "")  # "keras": every Keras backend
    ok, reason = catalog.available("torch", "reg-test")
    assert not ok and "--model-def torch=MODULE:FUNCTION" in reason


def test_model_file_toml_and_json(package: Path, tmp_path: Path) -> None:
    toml = read_model_file(package / "cnn.toml")
    assert toml["name"] == "tinycnn" and toml["label"] == "Tiny CNN" and toml["batch_size"] == 4
    assert toml["paths"] == [str(package.resolve())]  # the file's folder: its modules import from there
    sub = tmp_path / "elsewhere"
    sub.mkdir()
    (sub / "m.json").write_text(
        json.dumps(
            {"name": "j", "input": "tensor", "shape": [8], "builders": {"torch": "x:y"}, "paths": ["../work"]}
        )
    )
    loaded = read_model_file(sub / "m.json")
    assert loaded["shape"] == [8] and loaded["paths"] == [str(sub.resolve()), str(package.resolve())]


@pytest.mark.parametrize(
    ("text", "suffix", "says"),
    [
        ("name = ", ".toml", "not TOML"),
        ("{", ".json", "not JSON"),
        ("[1, 2]", ".json", "a table of fields"),
        ('name = "x"\n[builders]\ntorch = "nope"', ".toml", "is not MODULE:FUNCTION"),
    ],
)
def test_a_bad_model_file_is_one_line(tmp_path: Path, text: str, suffix: str, says: str) -> None:
    file = tmp_path / f"m{suffix}"
    file.write_text(text)
    with pytest.raises(PlanError, match=says) as caught:
        read_model_file(file)
    assert str(caught.value).startswith(f"model file {file}") and "\n" not in str(caught.value)
    with pytest.raises(PlanError, match="No such file"):
        read_model_file(tmp_path / "missing.toml")


def test_model_def_flags(package: Path) -> None:
    made = from_flags(
        ["torch=usernets.mlp:build_torch", "keras=usernets.mlp:build_keras"], None, "tensor:4x6", package
    )
    assert made["name"] == "mlp" and made["input"] == "tensor" and made["shape"] == [4, 6]
    assert made["paths"] == [str(package.resolve())]
    tokens = from_flags(["torch=usernets.lm:build_torch"], "lm1", "tokens:100:12", package)
    assert (tokens["name"], tokens["vocab"], tokens["seq_len"]) == ("lm1", 100, 12)
    for flags, input_spec, says in (
        (["torch"], None, "FRAMEWORK=MODULE:FUNCTION"),
        (["torch=a:b", "torch=a:c"], None, "names torch twice"),
        (["torch=a:b"], "tensor:4xq", "--model-input takes"),
        (["torch=a:b"], "tokens:100", "--model-input takes"),
    ):
        with pytest.raises(PlanError, match=says):
            from_flags(flags, None, input_spec, package)


def test_sources_are_found_without_importing_them(package: Path) -> None:
    ok = definition(package, name="c1", builders={"torch": "usernets.cnn:build_torch"})
    check_sources(ok)  # found, and the function is defined
    check_sources(definition(package, name="c2", builders={"torch": "usernets.needs_apex:build"}))
    # ^ a module that raises at import is read, never run: that it fails shows only in the run
    with pytest.raises(PlanError, match="defines no build_torchh"):
        check_sources(definition(package, name="c3", builders={"torch": "usernets.cnn:build_torchh"}))
    with pytest.raises(PlanError, match=r"no module usernets\.cnnn in"):
        check_sources(definition(package, name="c4", builders={"torch": "usernets.cnnn:build_torch"}))
    with pytest.raises(PlanError, match="losses.torch: no module nowhere"):
        check_sources(
            definition(
                package,
                name="c5",
                builders={"torch": "usernets.cnn:build_torch"},
                losses={"torch": "nowhere:f"},
            )
        )
    # Runs in another interpreter (--python) may have what this one lacks: not refused.
    check_sources(definition(package, name="c6", builders={"torch": "elsewhere.nets:build"}), {"torch"})
    # Library functions as losses and optimizers are found where the library is (torch is installed here).
    check_sources(
        definition(
            package,
            name="c7",
            builders={"torch": "usernets.cnn:build_torch"},
            optimizers={"torch": "torch.optim:AdamW"},
        )
    )


def test_plan_records_and_registers_its_own_models(package: Path) -> None:
    own = read_model_file(package / "cnn.toml")
    plan = Plan(
        frameworks=["torch", "tensorflow"], models=["tinycnn"], custom_models=[own], image_size=16, samples=8
    )
    plan.validate()
    config = plan.run_config("torch", "tinycnn", "001")
    assert config.model_def == own and config.batch_size == 4
    assert config.sample_shape("torch") == (3, 16, 16) and config.sample_shape("keras") == (16, 16, 3)
    # A session's plan, read back in a process that never saw the model, registers it.
    recorded = json.loads(json.dumps(plan.to_dict()))
    del catalog.MODELS["tinycnn"]
    again = Plan.from_dict(recorded)
    assert catalog.MODELS["tinycnn"].label == "Tiny CNN" and again.model_def("tinycnn") == own
    with pytest.raises(PlanError, match="has no builder for keras-torch"):
        Plan(
            frameworks=["keras-torch"],
            models=["tinycnn"],
            custom_models=[{**own, "builders": {"torch": "a:b"}}],
        ).validate()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model-def", "torch=usernets.cnn:build_torchh"], "defines no build_torchh"),
        (
            ["--model-def", "torch=usernets.cnn:build_torch", "--frameworks", "tensorflow"],
            "no builder for tensorflow",
        ),
        (["--model-file", "cnn.toml", "--model-file", "cnn.toml"], "two of your models are named 'tinycnn'"),
        (["--model-input", "tensor:8"], "describe a --model-def"),
    ],
)
def test_cli_refuses_a_bad_model_before_anything_starts(package: Path, args: list[str], says: str) -> None:
    out = benchtui(
        "run", "--headless", "--device", "cpu", "--no-nvml", "--sessions-dir", "s", *args, cwd=package
    )
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not (package / "s").exists()


# -- real runs ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_your_cnn_in_pytorch_and_tf_keras_is_one_session_with_parity(package: Path) -> None:
    """The issue's proof: a model file naming the same CNN in both frameworks; the session's parity
    figures (parameters and FLOPs per sample from each side's own counter) agree, and show, export
    and compare read it like any other."""
    tiny = "--image-size 16 --samples 8 --epochs 2 --runs 1 --device cpu --threads 1 --no-nvml".split()
    out = benchtui("run", "--headless", "--model-file", "cnn.toml", *tiny, "--sessions-dir", "s", cwd=package)
    assert out.returncode == 0, out.stderr[-3000:]
    session = only_session(package / "s")
    events = read_events(session)
    models = {e["run"].split("-")[1]: e for e in events if e["type"] == "model"}
    conv = (3 * 8 * 9 + 8) + (8 * 16 * 9 + 16)
    assert models["torch"]["params"] == models["tensorflow"]["params"] == conv + 16 * 1000 + 1000
    assert models["torch"]["trainable_params"] == models["tensorflow"]["trainable_params"]
    assert (
        models["torch"]["source"].startswith("usernets.cnn:build_torch (")
        and "sha256" in models["torch"]["source"]
    )
    flops = {e["run"].split("-")[1]: e["per_image"] for e in events if e["type"] == "flops"}
    assert flops["torch"] == pytest.approx(flops["tensorflow"], rel=0.01)
    ends = [e for e in events if e["type"] == "run_end"]
    assert [e["status"] for e in ends] == ["ok", "ok"]
    shown = benchtui("show", str(session))
    assert shown.returncode == 0 and "Tiny CNN" in shown.stdout and "usernets.cnn:build_keras" in shown.stdout
    exported = benchtui("export", str(session), "--format", "json", "-o", str(package / "out.json"))
    assert exported.returncode == 0, exported.stderr
    parity = json.loads((package / "out.json").read_text())
    assert "tinycnn" in json.dumps(parity)
    compared = benchtui("compare", str(session), str(session))
    assert compared.returncode == 0 and "Tiny CNN" in compared.stdout


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "tensorflow"])
def test_tensor_input_with_its_own_loss_and_optimizer(package: Path, framework: str) -> None:
    """Float tensors of the declared shape; the user's own loss and optimizer are used and recorded;
    a subclassed Keras model with no Input is built on the run's shape (its weights counted)."""
    own = definition(
        package,
        name="mlp",
        input="tensor",
        shape=[12],
        builders={"torch": "usernets.mlp:build_torch", "keras": "usernets.mlp:build_keras"},
        losses={"torch": "usernets.mlp:torch_loss", "keras": "usernets.mlp:keras_loss"},
        optimizers={"torch": "torch.optim:AdamW", "keras": "keras.optimizers:AdamW"},
    )
    config = {"framework": framework, "model": "mlp", "samples": 16, "batch_size": 4, "epochs": 2}
    events = run_runner({**config, "device": "cpu", "num_classes": 5, "threads": 1, "model_def": own})
    kinds = [e["type"] for e in events]
    assert "error" not in kinds and kinds[-1] == "done", [e for e in events if e["type"] == "error"]
    model = next(e for e in events if e["type"] == "model")
    assert model["params"] == 12 * 32 + 32 + 32 * 5 + 5 and model["kind"] == "tensor"
    settings = next(e for e in events if e["type"] == "hello")["settings"]
    family = "torch" if framework == "torch" else "keras"
    assert settings["loss"] == f"usernets.mlp:{family}_loss (the model's own)"
    assert settings["optimizer"].endswith(":AdamW (the model's own)")
    assert "benchtui adds no head" in settings["head_text"]
    assert sum(e["steps"] for e in events if e["type"] == "batch") == 8


@pytest.mark.slow
def test_a_token_model_trains_on_ids_of_its_vocabulary(package: Path) -> None:
    own = definition(
        package, name="lm", input="tokens", vocab=50, seq_len=6, builders={"torch": "usernets.lm:build_torch"}
    )
    config = {
        "framework": "torch",
        "model": "lm",
        "samples": 8,
        "batch_size": 4,
        "epochs": 1,
        "device": "cpu",
    }
    events = run_runner({**config, "threads": 1, "model_def": own})
    assert events[-1]["type"] == "done", events[-3:]
    model = next(e for e in events if e["type"] == "model")
    assert model["params"] == 50 * 16 + 16 * 50 + 50 and model["tokens_per_sample"] == 6


@pytest.mark.parametrize(
    ("builder", "says"),
    [
        (
            "usernets.needs_apex:build",
            "usernets.needs_apex:build: cannot import usernets.needs_apex (No module named 'apex')",
        ),
        ("usernets.broken:raises", "usernets.broken:raises raised RuntimeError: this network needs a GPU"),
        pytest.param(  # builds the user's network with PyTorch to find its type
            "usernets.broken:wrong_type",
            "returned a builtins.dict, not a torch Module (PyTorch trains it)",
            marks=pytest.mark.slow,
        ),
        ("usernets.broken:takes_three", "takes neither (input_shape, num_classes) nor (config)"),
        ("usernets.broken:nothing", "usernets.broken has no nothing"),
    ],
)
def test_a_builder_that_goes_wrong_is_one_line_naming_it(package: Path, builder: str, says: str) -> None:
    """What the runner reports when the user's builder cannot be imported or called, built here in
    this process (the runner's own code: benchtui_runners.custom.build)."""
    from benchtui_runners import custom
    from benchtui_runners.config import RunConfig

    name = f"b-{builder.rpartition(':')[2]}"
    catalog.register(definition(package, name=name, builders={"torch": builder}))
    config = RunConfig(framework="torch", model=name, image_size=8, num_classes=3)
    with pytest.raises(custom.ModelDefError) as caught:
        custom.build("torch", "torch", config)
    assert says in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("builder", "says"),
    [
        ("usernets.broken:raises", "usernets.broken:raises raised RuntimeError: this network needs a GPU"),
        (
            "usernets.broken:rejects",
            "rejects: the first step, on a batch of shape (4, 3, 8, 8), raised RuntimeError: ",
        ),
    ],
)
def test_a_builder_that_goes_wrong_fails_the_run_with_its_reason(
    package: Path, builder: str, says: str
) -> None:
    """In a real runner: the run fails with that line (no traceback in it), and a model that
    rejects its input says which input, in its first step."""
    name = builder.rpartition(":")[2]
    own = definition(package, name=name, builders={"torch": builder})
    config = {
        "framework": "torch",
        "model": name,
        "samples": 8,
        "batch_size": 4,
        "epochs": 1,
        "image_size": 8,
    }
    events = run_runner({**config, "device": "cpu", "threads": 1, "model_def": own})
    errors = [e for e in events if e["type"] == "error"]
    assert len(errors) == 1 and "done" not in [e["type"] for e in events]
    assert says in errors[0]["message"], errors[0]["message"]
    assert "\n" not in errors[0]["message"] and errors[0]["kind"] == "exception"


@pytest.mark.asyncio
async def test_the_plan_screen_opens_a_model_file(package: Path, tmp_path: Path) -> None:
    """The plan screen's "Your model" field: a model file adds the user's network to the ticked
    models, a bad one is one line in place, and a plan with one fills the field."""
    from textual.widgets import Input

    from benchtui.app import make_app
    from benchtui.screens.plan import GpuProbe, PlanScreen

    app = make_app(sessions_dir=str(tmp_path / "s"), probe=GpuProbe((), "NVML unavailable: test"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanScreen)
        field = screen.query_one("#model-file", Input)
        field.value = str(package / "cnn.toml")
        plan = screen.build_plan()
        # The quick preset's model (the app starts from quick without a GPU), then the file's.
        assert plan.models == ["resnet50_v1_5", "tinycnn"] and plan.custom_models[0]["label"] == "Tiny CNN"
        assert plan.batch_size("tinycnn") == 4  # the model file's batch size
        field.value = str(package / "missing.toml")
        screen.action_start()
        await pilot.pause()
        error = screen.query_one("#plan-error")
        assert error.display and "missing.toml: No such file or directory" in error.render().plain
        field.value = ""
        assert screen.build_plan().custom_models == []
        screen.fill(plan)
        assert field.value == str((package / "cnn.toml").resolve())


@pytest.mark.slow
def test_parity_counts_your_model_from_its_model_file(package: Path) -> None:
    out = benchtui(
        "parity", "--model-file", "cnn.toml", "--frameworks", "torch", "--format", "json", cwd=package
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (count,) = json.loads(out.stdout)["counts"]
    assert (count["model"], count["image_size"], count["trainable_params"]) == ("tinycnn", 224, 18392)
    bad = benchtui("parity", "--model-file", "missing.toml", cwd=package)
    assert bad.returncode == 2 and "missing.toml: No such file" in bad.stderr


# -- a module found through the user's own PYTHONPATH (issue 30) ----------------------------------------
def test_a_module_on_the_users_pythonpath_is_passed_to_the_runners_by_its_folder(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan check finds ``usernets`` through PYTHONPATH; the definition the runners get names that
    folder (and only it: not the rest of PYTHONPATH, not this Python's own path)."""
    elsewhere, other = tmp_path / "elsewhere", tmp_path / "other"
    elsewhere.mkdir()
    other.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(other), str(package)]))
    # As Python puts PYTHONPATH: before its own folders (and before another test's user folder).
    monkeypatch.setattr(sys, "path", [str(other), str(package), *sys.path])
    own = from_flags(["torch=usernets.cnn:build_torch"], None, None)
    assert own["paths"] == [str(elsewhere)]
    check_sources(own)
    assert own["paths"] == [str(elsewhere), str(package)]
    # Found in the definition's own paths: nothing added.
    beside = from_flags(["torch=usernets.cnn:build_torch"], None, None, cwd=package)
    check_sources(beside)
    assert beside["paths"] == [str(package)]


@pytest.mark.slow
def test_pythonpath_model_def_runs_from_another_folder(package: Path, tmp_path: Path) -> None:
    """``PYTHONPATH=src benchtui run --model-def torch=mynets:build_torch`` from a folder that is not
    ``src``: the check passes and so does the run (it failed "cannot import" before)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    tiny = "--image-size 16 --samples 8 --batch-size 4 --epochs 1 --runs 1 --device cpu --threads 1 --no-nvml"
    out = benchtui(
        "run",
        "--headless",
        "--frameworks",
        "torch",
        "--model-def",
        "torch=usernets.cnn:build_torch",
        *tiny.split(),
        "--sessions-dir",
        "s",
        cwd=elsewhere,
        env={"PYTHONPATH": os.pathsep.join(p for p in (str(package), os.environ.get("PYTHONPATH")) if p)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    session = only_session(elsewhere / "s")
    ends = [e for e in read_events(session) if e["type"] == "run_end"]
    assert [e["status"] for e in ends] == ["ok"], ends
    plan = json.loads((session / "session.json").read_text())["plan"]
    assert plan["custom_models"][0]["paths"] == [str(elsewhere), str(package)]
