"""What one benchmark run does: the workload preset and the knobs, validated, in one place.

The same object feeds the worker (its run command and process setup), the CLI's flags, the
GUI's form and the report; `to_json` / `from_json` round-trip it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PRESETS: dict[str, str] = {
    "cnn": "small CNN: Conv2D/MaxPool/Dense on 100x100x3 images, 10 classes",
    "mlp": "MLP: two Dense(512) layers on 784 features, 10 classes",
    "resnet50": "ResNet50 (keras.applications, weights=None) on 224x224x3 images, 10 classes",
    "transformer": "Transformer encoder (2 blocks, 4 heads) on 256-token sequences, 2 classes",
}
DEFAULT_SHAPES: dict[str, tuple[int, ...]] = {
    "cnn": (100, 100, 3),
    "mlp": (784,),
    "resnet50": (224, 224, 3),
    "transformer": (256,),
}
DATA_MODES = {
    "array": "the whole dataset as one in-RAM NumPy array",
    "stream": "a streaming tf.data pipeline with prefetch",
}
DEVICES = ("gpu", "cpu")
ALLOCATORS = ("default", "cuda_malloc_async")
FAULTS = (
    "segfault",
    "abort",
    "exception",
    "tf_oom",
    "hang",
    "stderr_flood",
    "grandchild",
    "host_oom",
    "leak",
    "retrace",
)
MAX_BATCH = 1 << 20
MAX_STEPS = 1_000_000


class ConfigError(ValueError):
    """A knob has a value the benchmark cannot run; the message is one line for people."""


@dataclass(frozen=True)
class BenchConfig:
    """The workload and its knobs. Process-level knobs (device, memory growth, memory limit,
    allocator) are fixed for a worker's life; the rest may change between runs of one worker
    (the batch search reuses it)."""

    preset: str = "cnn"
    batch_size: int = 32
    steps: int = 20
    epochs: int = 1
    input_shape: tuple[int, ...] | None = None
    data: str = "array"
    # process-level
    device: str = "gpu"
    memory_growth: bool = False
    memory_limit_mb: int | None = None
    allocator: str = "default"
    # per run
    mixed_precision: bool = False
    jit_compile: bool = False
    run_eagerly: bool = False
    grad_accum: int = 1
    # fault injection (tests, and "show me what a segfault looks like" demos)
    fault: str | None = None
    fault_at_step: int = 2

    def validate(self) -> BenchConfig:
        """Return self when every value is usable.

        Raises:
            ConfigError: the first bad value, in one line.
        """
        if self.preset not in PRESETS:
            raise ConfigError(f"unknown preset {self.preset!r}: choose one of {', '.join(PRESETS)}")
        for name, value, top in (
            ("batch size", self.batch_size, MAX_BATCH),
            ("steps", self.steps, MAX_STEPS),
            ("epochs", self.epochs, 10_000),
            ("gradient accumulation steps", self.grad_accum, 1024),
            ("fault step", self.fault_at_step, MAX_STEPS),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
                raise ConfigError(f"{name} must be a whole number from 1 to {top}, not {value!r}")
        if self.input_shape is not None:
            want = len(DEFAULT_SHAPES[self.preset])
            if len(self.input_shape) != want or not all(
                isinstance(d, int) and 1 <= d <= 65536 for d in self.input_shape
            ):
                raise ConfigError(
                    f"input shape for {self.preset} must be {want} positive numbers "
                    f"(like {'x'.join(map(str, DEFAULT_SHAPES[self.preset]))}), "
                    f"not {self.input_shape!r}"
                )
            if self.preset == "resnet50" and min(self.input_shape[:2]) < 32:
                raise ConfigError("ResNet50 needs images of at least 32x32")
            if self.preset == "cnn" and min(self.input_shape[:2]) < 10:
                raise ConfigError("the CNN needs images of at least 10x10")
        if self.data not in DATA_MODES:
            raise ConfigError(f"data must be one of {', '.join(DATA_MODES)}, not {self.data!r}")
        if self.device not in DEVICES:
            raise ConfigError(f"device must be gpu or cpu, not {self.device!r}")
        if self.allocator not in ALLOCATORS:
            raise ConfigError(
                f"allocator must be one of {', '.join(ALLOCATORS)}, not {self.allocator!r}"
            )
        if self.memory_limit_mb is not None and not 64 <= self.memory_limit_mb <= 1 << 22:
            raise ConfigError("the GPU memory limit must be at least 64 MiB")
        if self.memory_limit_mb is not None and self.memory_growth:
            raise ConfigError(
                "memory growth and a memory limit cannot be combined: TensorFlow rejects a "
                "virtual device configuration on a GPU with memory growth"
            )
        if self.fault is not None and self.fault not in FAULTS:
            raise ConfigError(f"unknown fault {self.fault!r}: one of {', '.join(FAULTS)}")
        return self

    @property
    def shape(self) -> tuple[int, ...]:
        return self.input_shape or DEFAULT_SHAPES[self.preset]

    def with_batch(self, batch_size: int) -> BenchConfig:
        return dataclasses.replace(self, batch_size=batch_size)

    # -- what the worker gets
    def setup(self) -> dict[str, Any]:
        """Process-level settings, applied by the worker at TensorFlow import."""
        return {
            "device": self.device,
            "memory_growth": self.memory_growth,
            "memory_limit_mb": self.memory_limit_mb,
        }

    def env(self) -> dict[str, str]:
        """Environment the worker starts with (read by TensorFlow at import)."""
        env: dict[str, str] = {"TF_CPP_MIN_LOG_LEVEL": "0"}  # TF's log is evidence
        if self.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = "-1"
            # TF's BFC allocator on the CPU too: it keeps the in-use/peak statistics that
            # get_memory_info("CPU:0") reports (the default CPU allocator of some builds and
            # hosts answers "Allocator stats not available")
            env["TF_CPU_ALLOCATOR_USE_BFC"] = "true"
        if self.allocator != "default":
            env["TF_GPU_ALLOCATOR"] = self.allocator
        if self.memory_growth:
            env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
        return env

    def run_config(self) -> dict[str, Any]:
        """The worker's per-run command config."""
        cfg: dict[str, Any] = {
            "preset": self.preset,
            "batch_size": self.batch_size,
            "steps": self.steps,
            "epochs": self.epochs,
            "data": self.data,
            "mixed_precision": self.mixed_precision,
            "jit_compile": self.jit_compile,
            "run_eagerly": self.run_eagerly,
            "grad_accum": self.grad_accum,
        }
        if self.input_shape is not None:
            cfg["input_shape"] = list(self.input_shape)
        if self.fault is not None:
            cfg["fault"] = {"kind": self.fault, "at_step": self.fault_at_step}
        return cfg

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["input_shape"] = list(self.shape)
        return d

    @classmethod
    def from_form(cls, form: Mapping[str, Any]) -> BenchConfig:
        """The config a form asks for: the CLI's flags or the GUI's fields, named as this
        class's fields. Other keys are the form's own business; a missing one keeps its
        default; the input shape may be text ("64x64x3"); a GPU memory limit of 0 is none.

        Raises:
            ConfigError: a bad value, in one line.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in form.items() if k in names}
        if isinstance(values.get("input_shape"), str):
            values["input_shape"] = parse_shape(values["input_shape"])
        if "memory_limit_mb" in values:
            values["memory_limit_mb"] = values["memory_limit_mb"] or None
        return cls(**values).validate()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchConfig:
        """Raises ConfigError for unknown keys or bad values."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ConfigError(f"unknown benchmark settings: {', '.join(sorted(unknown))}")
        d = dict(data)
        if d.get("input_shape") is not None:
            d["input_shape"] = tuple(d["input_shape"])
        try:
            return cls(**d).validate()
        except TypeError as exc:
            raise ConfigError(str(exc)) from None

    def describe(self) -> str:
        """One line for people: "cnn 100x100x3, batch 32, 20 steps x 1 epoch on GPU"."""
        knobs = []
        if self.memory_growth:
            knobs.append("memory growth")
        if self.memory_limit_mb:
            knobs.append(f"GPU limit {self.memory_limit_mb} MiB")
        if self.allocator != "default":
            knobs.append(self.allocator)
        if self.mixed_precision:
            knobs.append("mixed precision")
        if self.jit_compile:
            knobs.append("XLA")
        if self.run_eagerly:
            knobs.append("eager")
        if self.grad_accum > 1:
            knobs.append(f"grad accum {self.grad_accum}")
        if self.data == "stream":
            knobs.append("tf.data stream")
        extra = f" ({', '.join(knobs)})" if knobs else ""
        shape = "x".join(map(str, self.shape))
        return (
            f"{self.preset} {shape}, batch {self.batch_size}, {self.steps} steps x "
            f"{self.epochs} epoch{'s' if self.epochs > 1 else ''} on {self.device.upper()}{extra}"
        )


def parse_shape(text: str | None) -> tuple[int, ...] | None:
    """An input shape written as "64x64x3" (or "64,64,3"); None for none.

    Raises:
        ConfigError: not numbers separated by x.
    """
    if not text:
        return None
    try:
        return tuple(int(x) for x in text.lower().replace(",", "x").split("x") if x.strip())
    except ValueError:
        raise ConfigError(f"input shape: {text!r} is not like 64x64x3") from None
