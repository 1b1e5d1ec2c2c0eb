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


def stated(log: str) -> dict[str, str]:
    return {what: value for what, value, _ in diagnose(log.encode()).stated}


def test_an_issue_forms_headed_answers_are_the_facts_they_name() -> None:
    """GitHub's issue forms (TensorFlow's since 2022): each field a heading, its answer on a
    line of its own; the same facts as the older templates' "Field: value" lines."""
    form = (
        "### TensorFlow version\n\nv2.12.0-rc1-12-g0db597d0d75 2.12.0\n\n### Custom code\n\nYes\n\n"
        "### OS platform and distribution\n\nWin11\n\n### Python version\n\n3.10\n\n"
        "### CUDA/cuDNN version\n\nCUDA 11.2 / cuDNN 8.1\n\n### Current behavior?\n\n"
    )
    assert stated(form) == {
        "TensorFlow": "2.12.0",
        "Platform": "native Windows",
        "CUDA installed": "11.2",
        "cuDNN installed (major)": "8",
    }
    got = first(form + LIST_GPUS)
    assert got is not None and got[0] == "no_gpu_visible" and "2.10 was the last release" in got[2]


@pytest.mark.parametrize(
    ("line", "fact", "value"),
    [
        ("- **TensorFlow version (use command below)**: ('v1.2.0-rc2-21-g12f033d', '1.2.0')",
         "TensorFlow", "1.2.0"),
        ("- TensorFlow version (use command below): b'v1.12.0-rc2-3-ga6d8ffae09' 1.12.0",
         "TensorFlow", "1.12.0"),
        ("- TensorFlow version: 2.1.0rc0", "TensorFlow", "2.1.0"),
        ("TensorFlow version: tf2.12.0", "TensorFlow", "2.12.0"),
        ("tensorflow-gpu - 1.4.0", "TensorFlow", "1.4.0"),
        ("My tensorflow version is 2.12.0.", "TensorFlow", "2.12.0"),
        ("> Name: tensorflow\n> Version: 2.6.0", "TensorFlow", "2.6.0"),
        ("- CUDA/cuDNN version: CUDA is 10.1, cuDNN is 7.6.5", "CUDA installed", "10.1"),
        ("CUDA/cuDNN version : CUDA V7.5.17, CuDNN v6.0:", "CUDA installed", "7.5"),
        ("- **CUDA/cuDNN version**: CUDA 8.0, cuDNN 5.1", "cuDNN installed (major)", "5"),
        ("CUDA version: 12.5", "CUDA installed", "12.5"),
        ("CUDA runtime version: 11.0.221", "CUDA installed", "11.0"),
        ("3.     cudnn version :  8.0.4", "cuDNN installed (major)", "8"),
        ("- Driver version: 390.87", "NVIDIA driver", "390.87"),
        ("I cuda_diagnostics.cc:355] driver version file contents: \"\"\"NVRM version: NVIDIA "
         "UNIX x86_64 Kernel Module  340.101  Thu Dec  1 15:18:11 PST 2016", "NVIDIA driver",
         "340.101"),
        ("I cuda_diagnostics.cc:200] libcuda reported version is: 340.101.0", "NVIDIA driver",
         "340.101.0"),
        ("- OS Platform and Distribution (e.g., Linux Ubuntu 16.04): windows 10", "Platform",
         "native Windows"),
    ],
)  # fmt: skip
def test_the_forms_people_state_versions_in(line: str, fact: str, value: str) -> None:
    assert stated(line + "\n").get(fact) == value


@pytest.mark.parametrize(
    "line",
    [
        # the driver's own CUDA ceiling is no install
        "W external/local_xla/xla/service/gpu/nvptx_compiler.cc:930] The NVIDIA driver's CUDA "
        "version is 12.4 which is older than the PTX compiler version 12.5.82.",
        "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |",
    ],
)
def test_a_cuda_version_that_is_the_drivers_is_not_an_install(line: str) -> None:
    assert "CUDA installed" not in stated(line + "\n")


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


@pytest.mark.parametrize(
    ("device", "sure"),
    [
        ("name: GeForce GT 520 major: 2 minor: 1 memoryClockRate (GHz) 1.62", True),
        ("pciBusID: 0000:01:00.0 name: GeForce GTX 760 computeCapability: 3.0", False),
    ],
)
def test_a_gpu_too_old_for_any_tensorflow_needs_no_version(device: str, sure: bool) -> None:
    """Below 3.0 no TensorFlow ever ran; 3.0 only built from source. With no version stated
    the first is said firmly, the second less so; a second, newer GPU or a GPU device that
    TensorFlow did create means the old one is not the problem."""
    log = f"I gpu_device.cc:1405] Found device 0 with properties:\n{device}\n"
    got = first(log)
    assert got is not None and got[0] == "unsupported_gpu_arch"
    assert (got[1] >= 0.9) is sure and ("3.0" in got[2] or "3.5" in got[2])
    newer = "pciBusID: 0000:02:00.0 name: GeForce RTX 2080 computeCapability: 7.5\n"
    assert first(log + newer) is None
    created = (
        "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 1500 MB "
        "memory) -> physical GPU (device: 0, name: GeForce GTX 760, pci bus id: 0000:01:00.0)\n"
    )
    assert first(log + created) is None


# --------------------------------------------- the CUDA / cuDNN installed against what TF asks for
NVCC = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release {v}, V{v}.85\n"
IMPORT_FAILS = "ImportError: {lib}: cannot open shared object file: No such file or directory\n"
WINDOWS_DSO = (
    "I c:\\tf_jenkins\\home\\workspace\\release-win\\tensorflow\\stream_executor\\"
    "dso_loader.cc:126] Couldn't open CUDA library {lib}\n"
)


def test_another_cuda_installed_than_the_library_asks_for_is_a_mismatch() -> None:
    got = first(NVCC.format(v="9.1") + IMPORT_FAILS.format(lib="libcublas.so.9.0"))
    assert got is not None
    cause, _, text = got
    assert cause == "cuda_cudnn_version_mismatch"
    assert "CUDA 9.1 installed" in text and "libcublas.so.9.0" in text and "CUDA 9.0" in text


@pytest.mark.parametrize(
    ("log", "releases"),
    [
        (IMPORT_FAILS.format(lib="libcudnn.so.6"), "1.3 to 1.4"),
        (IMPORT_FAILS.format(lib="libcudnn.so.5"), "1.0 to 1.2"),
        (WINDOWS_DSO.format(lib="cudnn64_5.dll"), "1.0 to 1.2"),
    ],
)
def test_a_cudnn_only_a_few_old_releases_used_is_a_mismatch(log: str, releases: str) -> None:
    """cuDNN 5.1 and 6 were each required by a few TF 1.x releases and soon replaced: most who
    lacked them had another cuDNN installed (the tested-build table says which releases)."""
    got = first(log)
    assert got is not None
    cause, _, text = got
    assert cause == "cuda_cudnn_version_mismatch"
    assert f"only TensorFlow {releases} were built with cuDNN" in text
    assert "Install cuDNN" in text and "or a TensorFlow built for the cuDNN you have" in text


@pytest.mark.parametrize(
    "log",
    [
        IMPORT_FAILS.format(lib="libcudnn.so.7"),
        IMPORT_FAILS.format(lib="libcudnn.so.8"),
        IMPORT_FAILS.format(lib="libcudnn.so.9"),
        WINDOWS_DSO.format(lib="cudnn64_8.dll"),
    ],
)
def test_a_cudnn_many_releases_used_reads_as_not_found(log: str) -> None:
    """cuDNN 7 served TF 1.5 to 2.3, 8 served 2.4 to 2.17 and 9 is current: lacking one is
    most often not having it installed (or not on the path)."""
    got = first(log)
    assert got is not None and got[0] == "missing_cuda_libs"
    assert "were built with cuDNN" not in got[2]


def test_the_cuda_asked_for_installed_but_not_found_is_a_path_problem() -> None:
    got = first(NVCC.format(v="11.8") + IMPORT_FAILS.format(lib="libcudart.so.11.0"))
    assert got is not None
    cause, _, text = got
    assert cause == "missing_cuda_libs"
    assert "CUDA 11.8 installed" in text and "loader path" in text


def test_cudnn_major_installed_against_the_one_asked_for() -> None:
    conda = "cudnn                     8.1.0.77             h3e0f4f4_0    conda-forge\n"
    got = first(
        conda + "W dso_loader.cc:64] Could not load dynamic library 'libcudnn.so.7'; dlerror: "
        "libcudnn.so.7: cannot open shared object file: No such file or directory\n"
    )
    assert got is not None and got[0] == "cuda_cudnn_version_mismatch"
    assert "cuDNN 8 installed" in got[2]


def test_nvidia_smi_cuda_version_is_the_drivers_ceiling_not_an_install() -> None:
    smi = "| NVIDIA-SMI 535.54.03   Driver Version: 535.54.03   CUDA Version: 12.2     |\n"
    got = first(smi + IMPORT_FAILS.format(lib="libcudart.so.11.0"))
    assert got is not None and got[0] == "missing_cuda_libs"
    assert "The log shows" not in got[2]  # no installed version is claimed


def test_tf_built_for_another_cuda_major_than_installed() -> None:
    got = first(
        "Successfully installed tensorflow-2.16.1\n"
        + NVCC.format(v="11.8")
        + "W gpu_device.cc:2251] Cannot dlopen some GPU libraries. Please make sure the missing "
        "libraries mentioned above are installed properly if you would like to use GPU.\n"
        + IMPORT_FAILS.format(lib="libcudart.so.12")
    )
    assert got is not None and got[0] == "cuda_cudnn_version_mismatch"
    assert "built and tested with CUDA 12" in got[2] and "CUDA 11.8 installed" in got[2]


@pytest.mark.parametrize(("driver", "too_old"), [("418.67", True), ("460.32.03", False)])
def test_a_cuda_runtime_tf_loaded_needs_its_driver(driver: str, too_old: bool) -> None:
    """No TF version stated, but the CUDA runtime it loaded names the CUDA release: nvidia-smi's
    driver below what that release needs is why CUDA will not start."""
    log = (
        f"| NVIDIA-SMI {driver}       Driver Version: {driver}       CUDA Version: 10.1     |\n"
        "2021-01-01 10:00:00.000000: I tensorflow/stream_executor/platform/default/dso_loader.cc:"
        "49] Successfully opened dynamic library libcudart.so.11.0\n"
        "2021-01-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_driver.cc:328] failed "
        "call to cuInit: CUDA_ERROR_UNKNOWN: unknown error\n"
    )
    got = first(log)
    assert got is not None
    assert (got[0] == "driver_too_old") is too_old
    if too_old:
        assert "loaded libcudart.so.11.0" in got[2] and driver in got[2]


NVCC_112 = "Cuda compilation tools, release 11.2, V11.2.152\n"


@pytest.mark.parametrize(
    ("log", "want"),
    [
        # TF 2.3 was built for CUDA 10.1: CUDA 11.2 installed is why it shows no GPU
        ("tensorflow==2.3.0\n" + NVCC_112 + LIST_GPUS, "cuda_cudnn_version_mismatch"),
        # up to CUDA 10 another minor is another release: 1.13 needs 10.0, not 10.1
        (
            "Successfully installed tensorflow-gpu-1.13.1\n"
            "Cuda compilation tools, release 10.1, V10.1.243\n" + LIST_GPUS,
            "cuda_cudnn_version_mismatch",
        ),
        # TF 1.8 (CUDA 9.0) under a driver older than 9.0's
        (
            "Successfully installed tensorflow-gpu-1.8.0\n"
            "| NVIDIA-SMI 375.66                 Driver Version: 375.66                    |\n"
            + LIST_GPUS,
            "driver_too_old",
        ),
    ],
)
def test_releases_before_2_4_are_judged_by_their_tested_cuda(log: str, want: str) -> None:
    got = first(log)
    assert got is not None and got[0] == want


def test_a_system_cuda_beside_tensorflow_and_cuda_is_no_strong_verdict() -> None:
    """From 2.14 pip brings its own CUDA: another release installed system-wide may be idle."""
    old = first("tensorflow==2.3.0\n" + NVCC_112 + LIST_GPUS)
    new = first("tensorflow==2.15.0\n" + NVCC_112.replace("11.2", "11.8") + LIST_GPUS)
    assert old is not None and new is not None
    assert old[0] == "cuda_cudnn_version_mismatch" and new[0] == "no_gpu_visible"


def test_versions_listed_with_no_failure_are_a_weaker_mismatch() -> None:
    """A user's environment listing (pip show and nvcc) and nothing else: the CUDA installed is
    not the one the build needs, so TensorFlow cannot use the GPU; said, but less surely than
    when a library was looked for and not found."""
    listed = "$ pip show tensorflow\nName: tensorflow\nVersion: 2.4.0\n" + NVCC.format(v="10.1")
    got = first(listed)
    assert got is not None and got[0] == "cuda_cudnn_version_mismatch"
    assert "built and tested with CUDA 11.0" in got[2] and "CUDA 10.1 installed" in got[2]
    failing = first(listed + IMPORT_FAILS.format(lib="libcudart.so.11.0"))
    assert failing is not None and failing[0] == got[0] and failing[1] > got[1]
    # CUDA and cuDNN both listed wrong are one finding, not two
    conda = (
        "cudatoolkit               10.1.243             h6bb024c_0\n"
        "cudnn                     7.6.5                cuda10.1_0\n"
        "tensorflow-gpu            2.5.0                    pypi_0    pypi\n"
    )
    both = first(conda)
    assert both is not None and both[0] == got[0] and both[1] == got[1]
    assert "cuDNN 7 installed" in both[2]


@pytest.mark.parametrize(
    "listed",
    [
        "tensorflow==2.4.0\n" + NVCC.format(v="11.0"),  # the tested CUDA
        "tensorflow==2.15.0\n" + NVCC.format(v="11.8"),  # pip brings its own CUDA from 2.14
        NVCC.format(v="10.1"),  # no TensorFlow version to set it against
    ],
)
def test_versions_listed_that_fit_or_cannot_be_judged_blame_nothing(listed: str) -> None:
    assert first(listed) is None


def test_devicequery_states_the_compute_capability() -> None:
    """CUDA's deviceQuery sample, beside the TensorFlow the user runs."""
    got = first(
        'Device 0: "GeForce GTX 680"\n'
        "  CUDA Capability Major/Minor version number:    3.0\n"
        "tensorflow 2.5.0\n"
    )
    assert got is not None and got[0] == "unsupported_gpu_arch"
    assert "compute capability 3.0" in got[2]


@pytest.mark.parametrize(
    "told",
    [
        ">>> import tensorflow as tf\n>>> tf.__version__\n'2.3.0'\n",
        ">>> print(tf.__version__)\n2.3.0\n",
        "In [2]: tf.__version__\r\nOut[2]: '2.3.0'\r\n",
        "$ pip show tensorflow-gpu\nName: tensorflow-gpu\nVersion: 2.3.0\n",
        "tf.__version__ = 2.3.0\n",
        "print(tf.__version__)  # 2.3.0\n",
    ],
)
def test_the_version_a_prompt_or_pip_show_answers_is_the_tf_version(told: str) -> None:
    got = first(told + NVCC_112 + LIST_GPUS)
    assert got is not None and got[0] == "cuda_cudnn_version_mismatch"
    assert "TensorFlow 2.3.0 is built and tested with CUDA 10.1" in got[2]


def test_a_question_without_a_version_answer_states_nothing() -> None:
    got = first(">>> tf.__version__\nTraceback (most recent call last):\n" + NVCC_112 + LIST_GPUS)
    assert got is not None and got[0] == "no_gpu_visible"


@pytest.mark.parametrize(
    "installed",
    [
        "$ grep CUDNN_MAJOR -A 2 /usr/include/cudnn.h\n#define CUDNN_MAJOR 8\n",
        "cuda-toolkit-11-8 is already the newest version (11.8.0-1).\n",
    ],
)
def test_cuda_and_cudnn_told_by_headers_and_apt_are_judged(installed: str) -> None:
    """TF 1.14 was built for CUDA 10.0 and cuDNN 7."""
    got = first("Successfully installed tensorflow-gpu-1.14.0\n" + installed + LIST_GPUS)
    assert got is not None and got[0] == "cuda_cudnn_version_mismatch"


def test_the_driver_proc_reports_is_the_driver() -> None:
    log = (
        "Successfully installed tensorflow-2.4.1\n"
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  440.33.01  Wed Nov 13 00:00:38 UTC 2019\n"
        + LIST_GPUS
    )
    got = first(log)
    assert got is not None and got[0] == "driver_too_old" and "440.33.01" in got[2]


def test_a_driver_too_old_for_any_tensorflow_2_is_a_candidate_without_a_tf_version() -> None:
    """Only the driver pasted (cat /proc/driver/nvidia/version): 396 runs no CUDA 10.0, so no
    TensorFlow 2 build; 440 runs TF 2.0-2.3's CUDA, so without a TF version nothing is said."""
    proc = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {}  Mon Apr 30 18:01:39 PDT 2018\n"
    got = first(proc.format("396.26"))
    assert got is not None and got[0] == "driver_too_old" and got[1] < 0.7
    assert "396.26" in got[2] and "410.48" in got[2]
    assert first(proc.format("440.33.01")) is None


# ------------------------------------------ a GPU newer than the CUDA the TensorFlow build runs on
CUDNN_HANDLE = (
    "E tensorflow/stream_executor/cuda/cuda_dnn.cc:328] Could not create cudnn handle: "
    "CUDNN_STATUS_INTERNAL_ERROR\n"
)
RTX_3090_FOUND = (
    "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1716] Found device 0 with properties:\n"
    "pciBusID: 0000:0a:00.0 name: GeForce RTX 3090 computeCapability: 8.6\n"
)
RTX_3080_SMI = "|   0  GeForce RTX 3080    Off  | 00000000:01:00.0  On |                  N/A |\n"


@pytest.mark.parametrize(
    ("log", "runs"),
    [
        (
            RTX_3090_FOUND + "I dso_loader.cc:48] Successfully opened dynamic library "
            "libcudart.so.10.1\n" + CUDNN_HANDLE,
            "CUDA 10.1 (libcudart.so.10.1)",
        ),
        (
            RTX_3090_FOUND + "I dso_loader.cc:48] Successfully opened dynamic library "
            "libcudnn.so.7\n" + CUDNN_HANDLE,
            "CUDA 10.2 at most",
        ),
        ("tensorflow-gpu==2.3.0\n" + RTX_3080_SMI + CUDNN_HANDLE, "CUDA 10.1 (TensorFlow 2.3"),
    ],
    ids=["cudart-loaded", "cudnn7-loaded", "tf-version-and-gpu-name"],
)
def test_a_gpu_newer_than_the_builds_cuda_explains_a_cudnn_failure(log: str, runs: str) -> None:
    """An RTX 30 card under a CUDA 10 TensorFlow: cuDNN has no code for it, and that, not
    another process holding the memory, is why its handle cannot be created."""
    got = first(log)
    assert got is not None
    cause, confidence, text = got
    assert cause == "unsupported_gpu_arch" and confidence >= 0.6
    assert "needs CUDA 11.0 or newer" in text and runs in text


@pytest.mark.parametrize(
    "log",
    [
        # TF 2.4 is built for CUDA 11.0: an RTX 30 card has code there
        "tensorflow-gpu==2.4.0\n" + RTX_3080_SMI + CUDNN_HANDLE,
        RTX_3090_FOUND + "Successfully opened dynamic library libcudart.so.11.0\n" + CUDNN_HANDLE,
        # two GPUs of different compute capabilities: which one TF used is unknown
        "tensorflow-gpu==2.3.0\n"
        + RTX_3080_SMI
        + "|   1  GeForce GTX 1080    Off  | 00000000:02:00.0 Off |                  N/A |\n"
        + CUDNN_HANDLE,
    ],
    ids=["tf-2.4", "cuda-11-loaded", "two-gpus"],
)
def test_a_gpu_the_builds_cuda_has_code_for_is_not_blamed(log: str) -> None:
    got = first(log)
    assert got is not None and got[0] != "unsupported_gpu_arch"


ILLEGAL_ADDRESS = (
    "E tensorflow/stream_executor/cuda/cuda_event.cc:29] Error polling for event status: failed "
    "to query event: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\n"
    "F tensorflow/core/common_runtime/gpu/gpu_event_mgr.cc:220] Unexpected Event status: 1\n"
)


def test_gpu_code_that_faults_on_a_gpu_the_builds_cuda_has_no_code_for_is_that_gpu() -> None:
    """The same RTX 30 card under CUDA 10.1 failing with an illegal address: what running
    there looks like; the card's own fault stays second. Under CUDA 11 the fault is the card's."""
    d = diagnose(
        (
            RTX_3090_FOUND
            + "Successfully opened dynamic library libcudart.so.10.1\n"
            + ILLEGAL_ADDRESS
        ).encode()
    )
    assert [c.id for c in d.causes][:2] == ["unsupported_gpu_arch", "illegal_memory_access_or_hw"]
    covered = RTX_3090_FOUND + "Successfully opened dynamic library libcudart.so.11.0\n"
    assert first(covered + ILLEGAL_ADDRESS)[0] == "illegal_memory_access_or_hw"  # type: ignore[index]


def test_a_gpu_below_the_prebuilt_minimum_explains_an_empty_gpu_list() -> None:
    """A 3.0 card, no TensorFlow version stated, and TensorFlow lists no GPU: the card's age is
    why, before any other reason a GPU goes unseen."""
    log = (
        "I gpu_device.cc:1716] Found device 0 with properties:\n"
        "pciBusID: 0000:01:00.0 name: GeForce GTX 680 computeCapability: 3.0\n"
        "I gpu_device.cc:1858] Adding visible gpu devices: \n"
        ">>> tf.config.list_physical_devices('GPU')\n[]\n"
    )
    got = first(log)
    assert got is not None and got[0] == "unsupported_gpu_arch" and "3.5" in got[2]


def test_a_gpu_named_only_by_product_is_judged_by_its_compute_capability() -> None:
    """nvidia-smi names the GPU but not its compute capability: the product's is used."""
    got = first("pip install tensorflow==2.16.1\n" + RTX_3080_SMI.replace("GeForce RTX 3080",
                "Tesla K80       ") + LIST_GPUS)  # fmt: skip
    assert got is not None
    cause, _, text = got
    assert cause == "unsupported_gpu_arch"
    assert "compute capability 5.0 or newer" in text and "3.7" in text


@pytest.mark.parametrize(
    "model",
    [
        "model name      : AMD Opteron(tm) Processor 6128 HE",
        "Intel(R) Celeron(R) N4505 @ 2.00GHz",
        "          product: Intel(R) Core(TM) i3 CPU       M 330  @ 2.13GHz",
        "Model name:            Intel(R) Core(TM)2 Quad CPU    Q6600  @ 2.40GHz",
        "model name : Intel(R) Xeon(R) CPU           X5650  @ 2.67GHz",
    ],
)
def test_a_cpu_model_from_a_family_before_avx_is_the_cause(model: str) -> None:
    got = first(model + "\n")
    assert got is not None and got[0] == "cpu_instructions_unsupported"
    assert "from a family without AVX" in got[2]


@pytest.mark.parametrize(
    "model",
    [
        "Model name:          Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz",
        "model name : Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz",
        "Intel(R) Celeron(R) 6305 @ 1.80GHz",  # Tiger Lake: the first Celerons with AVX
        "model name : AMD Opteron(tm) Processor 6276",  # Bulldozer
    ],
)
def test_a_cpu_model_with_avx_blames_nothing(model: str) -> None:
    assert first(model + "\n") is None


def test_the_flags_a_user_pasted_outweigh_the_model_name() -> None:
    """A model line beside its flags: the flags are what the CPU (or the VM) really offers."""
    model = "model name : Intel(R) Xeon(R) CPU X5650 @ 2.67GHz\n"
    assert first(model + "flags : fpu vme de pse tsc msr sse sse2 avx\n") is None
