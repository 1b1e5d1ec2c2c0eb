"""Apply config fixes where the crash happens, reversibly: a Jupyter kernelspec, a conda
environment, a shell env file, or a notebook preamble.

Every write is atomic (temp file, fsync, rename), backs up what it replaces, is idempotent
(applying twice changes nothing more), and is recorded in an undo log so that
`tfdoctor fixes undo` puts every byte back. A target that is not what it should be (a
kernel.json that is not JSON, a read-only folder) is refused with one line and nothing
changes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfdoctor.core.fixes import kernel_step
from tfdoctor.core.fixes.transaction import (
    FixError,
    Transaction,
    check_writable,
)
from tfdoctor.core.knowledge import catalog

log = logging.getLogger(__name__)

CONDA_HOOK = "tfdoctor.sh"
CLONE_SUFFIX = "-tfdoctor"
_PARAM_REF = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PY_LITERAL = re.compile(r"^(?:True|False|-?\d+(?:\.\d+)?)$")
_SAFE_PARAM = re.compile(r"^[A-Za-z0-9_./:=,+@%-]{1,4096}$")
_DEVICE = r"(?:\d{1,3}|(?:GPU|MIG)-[0-9A-Fa-f/-]{1,80})"
_PARAM_KINDS = {  # the parameters whose values have a shape: (pattern, what it must be)
    "memory_limit_mb": (re.compile(r"^[1-9]\d{0,6}$"), "a whole number of MiB (1 to 9999999)"),
    "batch_size": (re.compile(r"^[1-9]\d{0,6}$"), "a whole number (1 to 9999999)"),
    "gpu": (re.compile(rf"^{_DEVICE}(?:,{_DEVICE})*$"), "GPU indices or UUIDs (0 or 0,1)"),
    "jit": (re.compile(r"^(?:True|False)$"), "True or False"),
}


# --------------------------------------------------------------------------- planning

# fixes that must never be combined, and why
CONTRADICTIONS = {
    frozenset({"memory_growth", "memory_limit"}): "TensorFlow ignores memory growth on a GPU "
    "with a memory limit: choose one",
}


def contradiction(fix_ids: Iterable[str]) -> str | None:
    """Why these fixes must not be combined, or None."""
    ids = set(fix_ids)
    return next((f"{' and '.join(sorted(pair))}: {why}" for pair, why in
                 CONTRADICTIONS.items() if pair <= ids), None)  # fmt: skip


def needs_value(fid: str, params: Mapping[str, str] | None = None) -> str | None:
    """The first parameter of a fix that has no default and no value given, or None."""
    fix = catalog.fixes().get(fid)
    if fix is None:
        return None
    given = params or {}
    return next((k for k, default in fix.params if not default and not given.get(k)), None)


@dataclass(frozen=True)
class Plan:
    """What a set of fixes changes, parameters filled in."""

    fix_ids: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()
    preamble: str = ""

    @property
    def empty(self) -> bool:
        return not (self.env or self.unset or self.preamble)


def plan(fix_ids: Iterable[str], params: Mapping[str, str] | None = None) -> Plan:
    """The changes of config fixes, with `params` (else each fix's defaults) filled in.

    Raises:
        FixError: an unknown fix, one tfdoctor cannot apply (code, commands, actions), a
            parameter value that is not a plain token, or two fixes that disagree.
    """
    known = catalog.fixes()
    params = dict(params or {})
    for k, v in params.items():
        if not _SAFE_PARAM.match(v):
            raise FixError(
                f"parameter {k}: {v!r} is not a plain value (letters, digits, ./:=,+@%-)"
            )
        kind = _PARAM_KINDS.get(k)
        if kind is not None and not kind[0].match(v):
            raise FixError(f"parameter {k}: {v!r} is not {kind[1]}")
    ids_given = list(dict.fromkeys(fix_ids))
    takes = {name for fid in ids_given if fid in known for name, _ in known[fid].params}
    unknown = sorted(set(params) - takes - {"batch_size"})  # the batch size is for the bench
    if unknown and all(fid in known for fid in ids_given):
        raise FixError(
            f"{', '.join(ids_given)} take{'s' if len(ids_given) == 1 else ''} no parameter "
            f"{', '.join(unknown)}" + (f" (known: {', '.join(sorted(takes))})" if takes else "")
        )
    env: dict[str, str] = {}
    unset: list[str] = []
    preambles: list[str] = []
    ids = list(dict.fromkeys(fix_ids))
    if not ids:
        raise FixError("no fix given")
    clash_why = contradiction(ids)
    if clash_why:
        raise FixError(clash_why)
    for fid in ids:
        fix = known.get(fid)
        if fix is None:
            raise FixError(f"unknown fix {fid!r} (see `tfdoctor fixes list`)")
        if not fix.applicable:
            raise FixError(
                f"{fid} is a {fix.kind} fix: tfdoctor shows it but cannot apply it ({fix.summary})"
            )
        values = {**dict(fix.params), **{k: v for k, v in params.items() if k in dict(fix.params)}}
        name = needs_value(fid, params)
        if name:  # a parameter without a default is measured, never invented
            raise FixError(
                f"{fid} needs {name}, and nothing measured it: give it with --set {name}=VALUE "
                "(or run the check / the batch search, and tfdoctor sizes it)"
            )
        for name in _PARAM_REF.findall(fix.preamble):  # Python code: only literals go in
            if not _PY_LITERAL.match(values.get(name, "")):
                raise FixError(f"parameter {name} of {fid} must be a number, True or False")

        def fill(text: str, values: dict[str, str] = values) -> str:
            return _PARAM_REF.sub(lambda m: values.get(m.group(1), m.group(0)), text)

        for k, v in fix.env:
            value = fill(v)
            if k in env and env[k] != value:
                raise FixError(f"{fid} sets {k}={value} but another fix sets {k}={env[k]}")
            env[k] = value
        unset += [u for u in fix.unset if u not in unset]
        if fix.preamble:
            preambles.append(f"# {fix.title} [{fid}]\n{fill(fix.preamble)}")
    clash = set(env) & set(unset)
    if clash:
        raise FixError(f"the fixes both set and unset {', '.join(sorted(clash))}")
    preamble = ""
    if preambles:
        preamble = (
            "# tfdoctor preamble: run this cell first, before anything imports TensorFlow\n"
            + "\n\n".join(preambles)
            + "\n"
        )
    return Plan(tuple(ids), env, tuple(unset), preamble)


# --------------------------------------------------------------------------- safe writes


# --------------------------------------------------------------------------- where fixes go


def _kernelspec_dir(name: str) -> Path:
    try:
        from jupyter_client.kernelspec import KernelSpecManager
    except ImportError:
        raise FixError("jupyter_client is not installed: no kernelspecs to change") from None
    # find_kernel_specs lists folders without parsing them: a broken kernel.json is found,
    # then refused by _read_kernel_json with a clear message
    found = KernelSpecManager(ensure_native_kernel=False).find_kernel_specs()
    if name not in found:
        raise FixError(f"no Jupyter kernelspec named {name!r} (see `tfdoctor envs`)")
    return Path(found[name])


def _user_kernels_dir() -> Path:
    """The user's own kernelspec folder (honours JUPYTER_DATA_DIR): clones go there, so a
    kernel installed system-wide can be fixed without root."""
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir()) / "kernels"


def _read_kernel_json(d: Path) -> dict[str, Any]:
    """The kernelspec in `d`, read as the exported script reads it (one place for both).

    Raises:
        FixError: unreadable, not JSON, or not a kernelspec (no argv list, an env that is
            not an object); nothing was changed.
    """
    try:
        return kernel_step.load_spec(str(d / "kernel.json"))
    except kernel_step.Refused as exc:
        raise FixError(str(exc)) from None


_spec_bytes = kernel_step.spec_bytes


def apply_to_kernelspec(
    p: Plan, name: str, *, in_place: bool = False, force: bool = False
) -> dict[str, Any]:
    """Set the plan's variables in a kernelspec's env block.

    By default a copy "<display name> (tfdoctor)" is made next to the user's kernel (named
    "<name>-tfdoctor") so the original stays untouched; `in_place` edits the original.
    Preambles cannot go into a kernelspec: they are refused here (use the notebook preamble).

    Returns the undo record (None-like {"changed": False} when already applied).
    Raises:
        FixError: no such kernelspec, a malformed kernel.json, a read-only kernel.json
            (without `force`) or folder.
    """
    if p.preamble and not (p.env or p.unset):
        raise FixError("these fixes are Python code: paste the notebook preamble instead")
    src = _kernelspec_dir(name)
    _read_kernel_json(src)  # refused before anything starts
    dest = src if in_place else _user_kernels_dir() / (name + CLONE_SUFFIX)
    with Transaction("kernelspec", p.fix_ids, str(dest)) as tx:
        # read under the lock: two applies at once must not both start from the old file
        spec = _read_kernel_json(src)
        if not in_place:
            if dest.exists():
                spec = _read_kernel_json(dest)
            else:
                base = str(spec.get("display_name") or name)
                spec["display_name"] = f"{base} (tfdoctor)"
        env = dict(spec.get("env") or {})
        env.update(p.env)
        for k in p.unset:
            env.pop(k, None)
        spec["env"] = env
        if not spec["env"]:
            spec.pop("env")
        if in_place:
            check_writable(dest / "kernel.json", force)
        if not in_place and not (dest / "kernel.json").exists():
            if dest.exists():
                raise FixError(f"{dest} exists but holds no kernel.json: move it away first")
            files = {  # logos and other resources, then the changed kernel.json
                item.name: item.read_bytes()
                for item in src.iterdir()
                if item.is_file() and item.name != "kernel.json"
            }
            files["kernel.json"] = _spec_bytes(spec)
            tx.create_tree(dest, files)
        else:
            tx.write(dest / "kernel.json", _spec_bytes(spec))
        rec = tx.commit()
    return rec or {"changed": False, "target": str(dest)}


def _merged(p: Plan, earlier: str) -> Plan:
    """`p` on top of the variables an earlier apply wrote (its env-file block or conda hook):
    applying a second fix keeps the first one's settings, as a kernelspec's env block does."""
    env: dict[str, str] = {}
    unset: list[str] = []
    ids: list[str] = []
    for line in earlier.splitlines():
        head = re.match(r"#\s*(?:tfdoctor:|written by tfdoctor:)\s*fixes\s+([^;]*)", line)
        if head:
            ids += [f.strip() for f in head.group(1).split(",") if f.strip()]
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if len(words) == 2 and words[0] == "export" and "=" in words[1]:
            k, _, v = words[1].partition("=")
            if not k.startswith("_TFDOCTOR_SAVED_"):
                env[k] = v
                unset = [u for u in unset if u != k]
        elif len(words) == 2 and words[0] == "unset" and not words[1].startswith("_TFDOCTOR"):
            env.pop(words[1], None)
            unset.append(words[1])
    for k in p.unset:
        env.pop(k, None)
    env.update(p.env)
    unset = [u for u in dict.fromkeys([*unset, *p.unset]) if u not in env]
    return Plan(tuple(dict.fromkeys([*ids, *p.fix_ids])), env, tuple(unset), p.preamble)


def _sh_hook(p: Plan) -> tuple[bytes, bytes]:
    """activate.d / deactivate.d scripts: set the variables, remembering and restoring the
    values they had (or their absence)."""
    act = ["# written by tfdoctor: fixes " + ", ".join(p.fix_ids)]
    deact = ["# written by tfdoctor: undoes its activate.d/tfdoctor.sh"]
    for k in sorted(set(p.env) | set(p.unset)):
        saved = f"_TFDOCTOR_SAVED_{k}"
        act.append(
            f'if [ -n "${{{k}+x}}" ]; then export {saved}="${{{k}}}"; '
            f"else export {saved}=__tfdoctor_unset__; fi"
        )
        if k in p.env:
            act.append(f"export {k}={shlex.quote(p.env[k])}")
        else:
            act.append(f"unset {k}")
        deact.append(
            f'if [ "${{{saved}-}}" = __tfdoctor_unset__ ]; then unset {k}; '
            f'elif [ -n "${{{saved}+x}}" ]; then export {k}="${{{saved}}}"; fi; unset {saved}'
        )
    return ("\n".join(act) + "\n").encode(), ("\n".join(deact) + "\n").encode()


def apply_to_conda(p: Plan, prefix: str | Path, *, force: bool = False) -> dict[str, Any]:
    """activate.d / deactivate.d hooks in a conda environment (bash, zsh, sh).

    Raises:
        FixError: not a conda environment (no conda-meta), a read-only folder, a preamble-only plan.
    """
    env_dir = Path(prefix)
    if not (env_dir / "conda-meta").is_dir():
        raise FixError(f"{env_dir} is not a conda environment (no conda-meta folder)")
    if not (p.env or p.unset):
        raise FixError("these fixes are Python code: paste the notebook preamble instead")
    hooks = env_dir / "etc" / "conda"
    for hook in (hooks / "activate.d" / CONDA_HOOK, hooks / "deactivate.d" / CONDA_HOOK):
        check_writable(hook, force)
    with Transaction("conda", p.fix_ids, str(env_dir)) as tx:
        active = hooks / "activate.d" / CONDA_HOOK
        try:  # read under the lock: an earlier fix's variables stay
            earlier = active.read_text(encoding="utf-8") if active.is_file() else ""
        except (OSError, UnicodeDecodeError) as exc:
            raise FixError(f"cannot read {active}: {exc}; nothing was changed") from None
        act, deact = _sh_hook(_merged(p, earlier))
        tx.write(hooks / "activate.d" / CONDA_HOOK, act, 0o644)
        tx.write(hooks / "deactivate.d" / CONDA_HOOK, deact, 0o644)
        rec = tx.commit()
    return rec or {"changed": False, "target": str(env_dir)}


ENV_BLOCK_BEGIN = "# >>> tfdoctor >>>"
ENV_BLOCK_END = "# <<< tfdoctor <<<"


def env_file_text(p: Plan, existing: str | None = None) -> str:
    """The env file with the plan's variables. A file the user already has keeps every line
    of its own: the variables go in one marked block at its end (after a line break when the
    file lacks a final one), and a block from an earlier apply is replaced, not repeated."""
    lines = [f"# tfdoctor: fixes {', '.join(p.fix_ids)}; use with: source this-file"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(p.env.items())]
    lines += [f"unset {k}" for k in p.unset]
    if existing is None or existing.startswith("# tfdoctor: fixes"):  # new, or all ours
        existing = ""
    kept = existing.splitlines(keepends=True)
    marks = [line.rstrip("\r\n") for line in kept]
    begins = [i for i, m in enumerate(marks) if m == ENV_BLOCK_BEGIN]
    if begins:  # the block of an earlier apply: the last begin mark and the end after it
        end = next((j for j in range(begins[-1], len(marks)) if marks[j] == ENV_BLOCK_END), None)
        if end is not None:
            del kept[begins[-1] : end + 1]
    head = "".join(kept)
    if head and not head.endswith("\n"):
        head += "\n"
    return head + "\n".join([ENV_BLOCK_BEGIN, *lines, ENV_BLOCK_END]) + "\n"


def _block_of(text: str) -> str:
    """The lines of tfdoctor's block in an env file (a whole file tfdoctor wrote is one)."""
    lines = text.splitlines()
    if lines and lines[0].startswith("# tfdoctor: fixes"):
        return text
    if ENV_BLOCK_BEGIN in lines:
        start = len(lines) - 1 - lines[::-1].index(ENV_BLOCK_BEGIN)
        end = next((j for j in range(start, len(lines)) if lines[j] == ENV_BLOCK_END), None)
        if end is not None:
            return "\n".join(lines[start + 1 : end])
    return ""


def apply_to_env_file(p: Plan, path: str | Path, *, force: bool = False) -> dict[str, Any]:
    """A shell file to `source` before starting Jupyter or the script.

    Raises:
        FixError: the folder is missing or read-only, or the plan is Python code only.
    """
    if not (p.env or p.unset):
        raise FixError("these fixes are Python code: paste the notebook preamble instead")
    target = Path(path)
    if not target.parent.is_dir():
        raise FixError(f"cannot write {target}: folder {target.parent} does not exist")
    check_writable(target, force)
    with Transaction("env_file", p.fix_ids, str(target)) as tx:
        existing = None  # read under the lock: an earlier fix's variables stay
        if target.exists():
            try:
                existing = target.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise FixError(
                    f"{target} is not a text file (not UTF-8): nothing was changed"
                ) from None
            except OSError as exc:
                raise FixError(f"cannot read {target}: {exc.strerror or exc}") from None
        text = env_file_text(_merged(p, _block_of(existing or "")), existing)
        tx.write(target, text.encode(), None if existing is not None else 0o644)
        rec = tx.commit()
    return rec or {"changed": False, "target": str(target)}


def preamble_text(p: Plan) -> str:
    """The notebook's first cell: the variables (set before TF is imported) and the code."""
    lines = [f"# tfdoctor: fixes {', '.join(p.fix_ids)} (run before importing TensorFlow)"]
    if p.env or p.unset:
        lines.append("import os")
        lines += [f"os.environ[{k!r}] = {v!r}" for k, v in sorted(p.env.items())]
        lines += [f"os.environ.pop({k!r}, None)" for k in p.unset]
    text = "\n".join(lines) + "\n"
    if p.preamble:
        text += "\n" + p.preamble
    return text


# --------------------------------------------------------------------------- environment fixes


def commands_for(fix_id: str, facts: Any = None, python: str | None = None) -> list[str]:
    """The exact commands (or driver requirement) of an environment fix, from the check's
    facts: the pip command pinned to the TF version in use, the minimum driver for the CUDA
    the build needs, the pip wheels of the wrong CUDA major to remove. Empty when unknown."""
    from tfdoctor.core import knowledge

    def fact(name: str) -> Any:
        return facts.value(name) if facts is not None else None

    py = shlex.quote(python or str(fact("target.python") or "python"))
    tf_version = str(fact("tf.version") or "")
    compat = knowledge.load()
    if fix_id in ("install_tf_and_cuda", "install_gpu_tensorflow", "install_pip_cuda_libs"):
        pinned = compat.and_cuda_install(tf_version) if tf_version else None
        if pinned:
            return [f"{py} -m {pinned}"]
        return [f"{py} -m pip install 'tensorflow[and-cuda]'"]
    if fix_id == "install_tensorflow":
        return [f"{py} -m pip install 'tensorflow[and-cuda]'"]
    if fix_id == "upgrade_driver":
        cuda = str(fact("tf.build_cuda_version") or "")
        req = compat.min_driver_for_cuda(cuda) if cuda else None
        if req is None:
            return []
        have = fact("nvidia.driver_version")
        return [
            f"# install an NVIDIA driver >= {req.minimum} (CUDA {cuda}; "
            f"{'this machine has ' + str(have) if have else 'no driver found'}), e.g. "
            f"sudo apt install nvidia-driver-{req.minimum.split('.')[0]}"
        ]
    if fix_id == "remove_conflicting_cuda":
        cuda_major = str(fact("tf.build_cuda_version") or "").split(".")[0]
        wheels = fact("target.pip_nvidia") or []
        wrong = [
            str(w.get("name"))
            for w in wheels
            if isinstance(w, dict)
            and cuda_major
            and re.search(r"-cu(\d+)$", str(w.get("name")))
            and not str(w.get("name")).endswith(f"-cu{cuda_major}")
        ]
        return (
            [f"{py} -m pip uninstall -y " + " ".join(shlex.quote(w) for w in wrong)]
            if wrong
            else []
        )
    return []


# --------------------------------------------------------------------------- stop a GPU process


def _gpu_memory_now(pid: int) -> str:
    """What NVML shows after a stop (not what we hope): the process gone from the GPUs?"""
    holders = live_gpu_pids()
    if holders is None:
        return "NVML cannot show the GPUs here, so its GPU memory could not be confirmed free"
    if pid in holders:
        return "NVML still lists it on a GPU: its memory is not free yet"
    return "NVML no longer lists it on any GPU"


def live_gpu_pids() -> set[int] | None:
    """The PIDs NVML shows holding GPU memory now, or None when NVML cannot tell."""
    from tfdoctor.core.model import Facts, ProbeStatus
    from tfdoctor.core.probes import nvml

    result = nvml.collect()
    if result.status != ProbeStatus.OK:
        return None
    facts = Facts(result.facts)
    n = facts.value("gpu.count")
    pids: set[int] = set()
    for i in range(n if isinstance(n, int) else 0):
        for proc in facts.value(f"gpu{i}.processes") or []:
            if isinstance(proc, dict) and isinstance(proc.get("pid"), int):
                pids.add(proc["pid"])
    return pids


TERM_WAIT_S = 5.0  # after a shutdown request that did not end it
KILL_WAIT_S = 5.0


def stop_process(
    pid: int,
    *,
    wait_s: float = 10.0,
    other_user: bool = False,
    gpu_pids: set[int] | None = None,
) -> str:
    """Stop a process that holds GPU memory (the caller has asked the user first).

    Only a process NVML shows holding GPU memory (`gpu_pids`, default: asked of NVML now) or
    a Jupyter kernel is stopped; never PID 1, tfdoctor itself or a process it runs under;
    another user's process only with `other_user`. A Jupyter kernel is shut down the way
    Jupyter does it: through its notebook server's REST API when the server is found (the
    notebook then shows the kernel as stopped), else with a shutdown request on the kernel's
    own channels. Any other process gets SIGTERM. What has not ended within `wait_s` gets
    SIGTERM (after a shutdown request), then SIGKILL. Returns one line saying what happened
    and what NVML shows afterwards.

    Raises:
        FixError: no such process, one tfdoctor must not stop, or it did not stop in time.
    """
    import signal
    import time
    import urllib.request

    import psutil

    from tfdoctor.core.probes import jupyter

    if pid <= 1:
        raise FixError(f"process {pid} is the system's init: tfdoctor never stops it")
    me = psutil.Process()
    if pid == me.pid or pid in {p.pid for p in me.parents()}:
        raise FixError(f"process {pid} is tfdoctor itself or runs it: not stopped")
    try:
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
        owner = proc.uids().real
    except psutil.NoSuchProcess:
        raise FixError(f"no process {pid}") from None
    except psutil.AccessDenied:
        raise FixError(f"process {pid} belongs to another user: tfdoctor cannot stop it") from None
    if owner != os.getuid() and not other_user:
        raise FixError(
            f"process {pid} belongs to another user (uid {owner}): not stopped without --other-user"
        )
    kernel = jupyter.parse_kernel_cmdline(cmdline)
    holders = live_gpu_pids() if gpu_pids is None else gpu_pids
    if kernel is None and pid not in (holders or set()):
        seen = (
            "NVML shows it holding no GPU memory"
            if holders is not None
            else ("NVML cannot tell which processes hold GPU memory here")
        )
        raise FixError(f"process {pid} is not a Jupyter kernel and {seen}: not stopped")
    how = ""
    if kernel is not None and kernel.kernel_id:
        server = jupyter.find_notebook_server(pid)
        if server is not None and server.url:
            url = server.url.rstrip("/") + f"/api/kernels/{kernel.kernel_id}"
            req = urllib.request.Request(url, method="DELETE")
            if server.token:
                req.add_header("Authorization", f"token {server.token}")
            try:
                urllib.request.urlopen(req, timeout=5).close()
                how = f"Jupyter kernel {kernel.kernel_id} shut down through its server"
            except OSError:
                how = ""
    if not how and kernel is not None and Path(kernel.connection_file).is_file():
        try:
            from jupyter_client.blocking.client import BlockingKernelClient

            kc = BlockingKernelClient(connection_file=kernel.connection_file)
            kc.load_connection_file()
            kc.start_channels()
            kc.shutdown()
            with contextlib.suppress(Exception):  # the reply: the request was delivered
                kc.get_control_msg(timeout=5)
            kc.stop_channels()
            how = "Jupyter kernel asked to shut down on its own channels"
        except Exception:  # a kernel that does not answer: fall back to a signal
            log.info("kernel %s did not take a shutdown request", pid, exc_info=True)
            how = ""

    def ended(within_s: float) -> bool:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            try:
                if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                    return True
            except psutil.NoSuchProcess:
                return True
            time.sleep(0.1)
        return False

    # gently first (the kernel's own shutdown, or SIGTERM), then firmer: the user agreed to
    # lose its unsaved work, and a process stuck in C code answers nothing else
    said = [how] if how else []
    stages: list[tuple[signal.Signals | None, float]] = [(None, wait_s)] if how else []
    stages += [(signal.SIGTERM, wait_s if not how else TERM_WAIT_S), (signal.SIGKILL, KILL_WAIT_S)]
    for sig, within_s in stages:
        if sig is not None:
            try:
                proc.send_signal(sig)
            except psutil.NoSuchProcess:
                break
            except psutil.AccessDenied:
                raise FixError(f"not allowed to stop process {pid}") from None
            said.append(f"sent {signal.Signals(sig).name}" if said else
                        f"process {pid} sent {signal.Signals(sig).name}")  # fmt: skip
        if ended(within_s):
            return f"{'; '.join(said)}; it has exited. {_gpu_memory_now(pid)}"
    if not said:
        return f"process {pid} had already exited"
    raise FixError(f"{'; '.join(said)}, but it is still running (stuck in the kernel?)")
