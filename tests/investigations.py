"""A real investigation for the file, report and restore tests: a real environment check of
this Python, a real CPU run OOM-killed in a memory cgroup and the same run verified with the
streaming-data fix (`core.bench.verify`), a real fix applied to a real kernelspec copy, a real
crash log and a pasted log, with secrets planted where users leak them (Qt-free)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import FIXTURES
from tfdoctor.core import fixes
from tfdoctor.core.bench import memcg
from tfdoctor.core.bench.config import BenchConfig
from tfdoctor.core.bench.supervisor import SupervisorOptions
from tfdoctor.core.bench.verify import verify
from tfdoctor.core.probes.targetrun import current_target
from tfdoctor.core.redact import Identity
from tfdoctor.core.scan import CheckRun
from tfdoctor.core.session import Session

WHY_NO_MEMCG = memcg.unavailable()

# secrets and identities a user's logs and machine carry; none may reach a redacted report
HOME = "/home/alice-lab"
USER = "alicew"
HOST = "gpu-box-17.lab.example.org"
SECRETS = {
    "HF_TOKEN": "hf_PlantedSecretValue0123456789abcd",
    "WANDB_API_KEY": "wandbPlantedKey9876543210",
    "DB_PASSWORD": "Pl4nted-Passw0rd!",
}
URL_PASSWORD = "urlPl4ntedPw"
BEARER = "eyJPlantedBearer.payload.signature"
LOG_TOKEN = "ghp_PlantedGithubToken0123456789abcdefgh"
PLANTED = [*SECRETS.values(), URL_PASSWORD, BEARER, LOG_TOKEN, HOME, USER, HOST, "gpu-box-17"]
IDENTITY = Identity(homes=(HOME,), users=(USER,), hosts=(HOST,))

PASTED = f"""\
(tf) {USER}@gpu-box-17:~/proj$ HF_TOKEN={SECRETS["HF_TOKEN"]} python train.py
Cloning https://{USER}:{URL_PASSWORD}@git.example.org/team/models.git into {HOME}/proj/models
curl -H "Authorization: Bearer {BEARER}" https://api.example.org/upload
pushing with {LOG_TOKEN} to the mirror
wandb: logging in with WANDB_API_KEY={SECRETS["WANDB_API_KEY"]}
db password is {SECRETS["DB_PASSWORD"]} on {HOST}
Epoch 1/10
Killed
"""


@contextmanager
def planted_environment() -> Iterator[None]:
    """The secrets in this process's environment (as a user's shell has them)."""
    saved = {k: os.environ.get(k) for k in SECRETS}
    os.environ.update(SECRETS)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def make_session(work: Path) -> Session:
    """Every part of an investigation, from real runs (about two minutes on 2 cores)."""
    state = work / "state"
    os.environ["TFDOCTOR_STATE_DIR"] = str(state)
    target = current_target()
    s = Session(door="log", target=target)
    s.add_log("pasted text", PASTED.encode())
    log = work / "real_host_oom_kill.txt"
    log.write_bytes((FIXTURES / "logs" / "real_host_oom_kill.txt").read_bytes())
    s.add_log(log.name, path=str(log))
    report = CheckRun(target, timeout_s=180).start().wait()
    assert report is not None and not report.cancelled
    s.check = report
    config = BenchConfig(preset="mlp", batch_size=4096, steps=40, device="cpu")
    options = SupervisorOptions(memory_cap_mib=1100, guard_mib=0, stall_s=60)
    v = verify(target, config, ["stream_tf_data"], options=options)
    s.bench, s.telemetry, s.bench_options = v.before_result, v.before_telemetry, options
    s.verifications.append(v)
    # a real fix applied to a real kernelspec copy
    data = work / "jupyter"
    spec = data / "kernels" / "tfd-inv"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "TF", "language": "python"})
    )
    old = {k: os.environ.get(k) for k in ("JUPYTER_DATA_DIR", "JUPYTER_PATH")}
    os.environ["JUPYTER_DATA_DIR"] = os.environ["JUPYTER_PATH"] = str(data)
    try:
        rec = fixes.apply_to_kernelspec(fixes.plan(["memory_growth"]), "tfd-inv")
        s.note_fix("applied", rec)
    finally:
        for k, val in old.items():
            if val is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = val
    return s
