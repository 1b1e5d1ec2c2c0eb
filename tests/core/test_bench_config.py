"""The benchmark config from a form (the CLI's flags, the GUI's fields): one mapping for both."""

from __future__ import annotations

import pytest

from tfdoctor.core.bench.config import BenchConfig, ConfigError, parse_shape
from tfdoctor.core.cli import build_parser


def test_the_cli_flags_map_onto_the_config_fields() -> None:
    args = build_parser().parse_args(
        ["bench", "--preset", "mlp", "--batch-size", "64", "--steps", "5", "--epochs", "2",
         "--input-shape", "128", "--device", "cpu", "--gpu-memory-limit-mb", "2048",
         "--allocator", "cuda_malloc_async", "--mixed-precision", "--xla", "--eager",
         "--data", "stream", "--grad-accum", "4", "--fault", "hang", "--fault-at-step", "3"]
    )  # fmt: skip
    assert BenchConfig.from_form(vars(args)) == BenchConfig(
        preset="mlp", batch_size=64, steps=5, epochs=2, input_shape=(128,), device="cpu",
        memory_limit_mb=2048, allocator="cuda_malloc_async", mixed_precision=True,
        jit_compile=True, run_eagerly=True, data="stream", grad_accum=4, fault="hang",
        fault_at_step=3,
    )  # fmt: skip
    defaults = build_parser().parse_args(["bench"])
    assert BenchConfig.from_form(vars(defaults)) == BenchConfig()


def test_a_form_keeps_defaults_for_what_it_lacks_and_0_is_no_gpu_limit() -> None:
    form = {"preset": "cnn", "batch_size": 8, "memory_limit_mb": 0, "label": "not a field"}
    assert BenchConfig.from_form(form) == BenchConfig(batch_size=8)
    assert BenchConfig.from_form({"input_shape": "64x64x3"}).input_shape == (64, 64, 3)
    assert BenchConfig.from_form({"input_shape": ""}).input_shape is None


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"input_shape": "axb"}, "not like 64x64x3"),
        ({"memory_growth": True, "memory_limit_mb": 2048}, "memory growth"),
        ({"batch_size": 0}, "batch size"),
        ({"preset": "vgg"}, "unknown preset"),
    ],
)
def test_bad_form_values_are_one_line_config_errors(form: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as exc:
        BenchConfig.from_form(form)
    assert "\n" not in str(exc.value)


def test_shapes_are_written_with_x_or_commas() -> None:
    assert parse_shape("32X32x3") == (32, 32, 3)
    assert parse_shape("32,32,3") == (32, 32, 3)
    assert parse_shape(None) is None
