"""Facts a log states (TF version, platform, compute capability, driver) decide causes.

The lines are the forms real pastes hold (pip's install line, a docker tag, Windows paths, the
device line TF prints, nvidia-smi's header); the verdicts come from compat.toml.
"""

from __future__ import annotations

import pytest

from tfdoctor.core.diagnose.engine import diagnose

WINDOWS_IMPORT = (
    '  File "C:\\Users\\ana\\miniconda3\\envs\\tf\\lib\\site-packages\\tensorflow\\__init__.py",'
    " line 37, in <module>\n"
)
LIST_GPUS = ">>> tf.config.list_physical_devices('GPU')\n[]\n"


def first(log: str) -> tuple[str, float, str] | None:
    d = diagnose(log.encode())
    if not d.causes:
        return None
    c = d.causes[0]
    return c.id, c.confidence, c.explanation


def test_tf_2_11_and_later_on_native_windows_has_no_gpu() -> None:
    got = first("Successfully installed tensorflow-2.12.0 tensorflow-intel-2.12.0\n"
                + WINDOWS_IMPORT + LIST_GPUS)  # fmt: skip
    assert got is not None
    cause, confidence, text = got
    assert cause == "no_gpu_visible" and confidence >= 0.75
    assert "2.10 was the last release" in text and "WSL2" in text


@pytest.mark.parametrize(
    "log",
    [
        # 2.10 still had GPU support on native Windows
        "Successfully installed tensorflow-2.10.1\n" + WINDOWS_IMPORT + LIST_GPUS,
        # the same version under WSL2 is a Linux build with GPU support
        "Successfully installed tensorflow-2.12.0\n"
        "Linux DESKTOP-7 5.15.90.1-microsoft-standard-WSL2 #1 SMP x86_64 GNU/Linux\n"
        + WINDOWS_IMPORT
        + LIST_GPUS,
        # Linux paths
        "Successfully installed tensorflow-2.12.0\n"
        '  File "/home/ana/.local/lib/python3.10/site-packages/tensorflow/__init__.py"\n'
        + LIST_GPUS,
    ],
    ids=["tf-2.10-windows", "wsl2", "linux"],
)
def test_windows_rule_needs_native_windows_and_tf_2_11(log: str) -> None:
    got = first(log)
    assert got is None or "native Windows" not in got[2]


def test_gpu_below_the_builds_minimum_compute_capability() -> None:
    got = first(
        "tensorflow==2.16.1\n"
        "I0000 00:00:1712 gpu_device.cc:1928] Created device /job:localhost/replica:0/task:0/"
        "device:GPU:0 with 10790 MB memory:  -> device: 0, name: Tesla K80, pci bus id: "
        "0000:05:00.0, compute capability: 3.7\n"
    )
    assert got is not None
    cause, _, text = got
    assert cause == "unsupported_gpu_arch"
    assert "compute capability 5.0 or newer" in text and "3.7" in text


def test_supported_compute_capability_blames_nothing() -> None:
    assert (
        first(
            "tensorflow==2.16.1\n"
            "Created device /job:localhost/replica:0/task:0/device:GPU:0 with 22000 MB memory:"
            "  -> device: 0, name: NVIDIA GeForce RTX 3090, pci bus id: 0000:01:00.0, "
            "compute capability: 8.6\n"
        )
        is None
    )


def test_driver_older_than_the_builds_cuda_needs() -> None:
    header = "| NVIDIA-SMI {d}    Driver Version: {d}    CUDA Version: {c}     |\n"
    old = first("pip install tensorflow==2.15.0\n" + header.format(d="470.57.02", c="11.4"))
    assert old is not None
    cause, _, text = old
    assert cause == "driver_too_old"
    assert "470.57.02" in text and "525.60.13" in text
    new = header.format(d="535.104.05", c="12.2")
    assert first("pip install tensorflow==2.15.0\n" + new) is None


def test_no_tf_version_stated_means_no_fact_verdict() -> None:
    # the same device line without a TF version: the tables cannot judge it
    assert (
        first(
            "Created device /job:localhost/replica:0/task:0/device:GPU:0 with 10790 MB memory:"
            "  -> device: 0, name: Tesla K80, pci bus id: 0000:05:00.0, compute capability: 3.7\n"
            + WINDOWS_IMPORT
        )
        is None
    )
