"""The Jupyter-kernel step of an exported .sh fix script.

It runs on the machine where the crash happens, in the kernel's own interpreter, where tfdoctor
may not be installed: standard library only, Python 3.7 or newer, no tfdoctor import. The script
feeds this file to `python -` with:

    MODE STATE_DIR SUFFIX ENV_JSON [KERNEL]      MODE: dry-run | --apply | --undo

--apply gives a copy of kernelspec KERNEL (named KERNEL + SUFFIX in the user's kernel folder,
shown as "<its name> (tfdoctor)") the settings in its env block, as the app's "Apply to the
kernel" does; the original kernelspec is never touched. Before the first change it records in
STATE_DIR/kernels/ what the copy's folder held (nothing, or an earlier copy's kernel.json) and
the digest of what it is about to write; every file is written whole (a temporary, then one
rename). --undo gives the folder back as that record says, to the byte, when the copy is as
written; when the user changed it since, it takes out only its own settings. A kill at any
point leaves the old state or the new one, and the next --apply or --undo finishes the job.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import sys
from typing import Any

NEW = ".tfdoctor-new"  # a copy being built, renamed into place whole
OLD = ".tfdoctor-old"  # a copy being removed, renamed out of place first
TMP = ".tfdoctor-tmp"  # a file being written, renamed over the file


class Refused(Exception):
    """One line for the user; nothing was changed."""


def say(text: str) -> None:
    print(text)
    sys.stdout.flush()


def digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def write_whole(path: str, data: bytes, mode: int | None = None) -> None:
    """`data` becomes `path`'s bytes in one rename; the mode it had stays."""
    tmp = path + TMP
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)


def remove_tree(path: str) -> None:
    """Out of place in one rename, then deleted: a kill leaves it whole or gone."""
    if os.path.isdir(path):
        os.replace(path, path + OLD)
    if os.path.isdir(path + OLD):
        shutil.rmtree(path + OLD)


def data_dirs() -> tuple[list[str], str]:
    """Where Jupyter looks for kernelspecs, and the user's own kernel folder."""
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        ksm = KernelSpecManager(ensure_native_kernel=False)
        return list(ksm.kernel_dirs), str(ksm.user_kernel_dir)
    except Exception:  # noqa: BLE001 - no Jupyter here (or a broken one): Jupyter's own search path
        pass
    home = os.path.expanduser("~")
    if os.environ.get("JUPYTER_DATA_DIR"):
        user = os.environ["JUPYTER_DATA_DIR"]
    elif sys.platform == "darwin":
        user = os.path.join(home, "Library", "Jupyter")
    elif os.name == "nt":
        user = os.path.join(os.environ.get("APPDATA") or home, "jupyter")
    else:
        xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
        user = os.path.join(xdg, "jupyter")
    paths = [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    paths += [user, os.path.join(sys.prefix, "share", "jupyter")]
    paths += ["/usr/local/share/jupyter", "/usr/share/jupyter"]
    user_kernels = os.path.join(user, "kernels")
    return [os.path.join(p, "kernels") for p in paths], user_kernels


def find_spec(name: str, dirs: list[str]) -> str:
    for d in dirs:
        folder = os.path.join(d, name)
        if os.path.isfile(os.path.join(folder, "kernel.json")):
            return folder
    try:  # the kernel ipykernel brings without a kernelspec folder ("python3")
        from jupyter_client.kernelspec import KernelSpecManager

        found = KernelSpecManager().find_kernel_specs()
        if name in found:
            return str(found[name])
    except Exception:  # noqa: BLE001 - no Jupyter here: not found
        pass
    raise Refused(f"no Jupyter kernel named {name!r} here (`jupyter kernelspec list` names them)")


def load_spec(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            spec = json.loads(f.read().decode("utf-8"))
    except OSError as exc:
        raise Refused(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply to read
        raise Refused(f"{path} is not valid JSON ({exc}): not touched") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("argv"), list):
        raise Refused(f"{path} is not a kernelspec (no argv list): not touched")
    if not isinstance(spec.get("env", {}), dict):
        raise Refused(f"{path}: its env is not a JSON object: not touched")
    return spec


def spec_bytes(spec: dict[str, Any]) -> bytes:
    return (json.dumps(spec, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def with_settings(spec: dict[str, Any], env: dict[str, str], unset: list[str]) -> dict[str, Any]:
    out = dict(spec)
    merged = dict(out.get("env") or {})
    merged.update(env)
    for k in unset:
        merged.pop(k, None)
    out["env"] = merged
    if not merged:
        del out["env"]
    return out


def record_path(state: str, dest: str) -> str:
    return os.path.join(state, "kernels", os.path.basename(dest) + ".json")


def load_record(path: str) -> dict[str, Any] | None:
    data = read(path)
    if data is None:
        return None
    try:
        rec = json.loads(data.decode("utf-8"))
    except ValueError:
        raise Refused(f"{path} is not the record tfdoctor wrote: not touched") from None
    if not isinstance(rec, dict) or not isinstance(rec.get("dest"), str):
        raise Refused(f"{path} is not the record tfdoctor wrote: not touched")
    return rec


def tidy(dest: str) -> None:
    """What a killed run left: a half-built copy, a half-removed one, a temporary file."""
    if os.path.isdir(dest + NEW):
        shutil.rmtree(dest + NEW)
    if os.path.isdir(dest + OLD):
        shutil.rmtree(dest + OLD)
    if os.path.exists(os.path.join(dest, "kernel.json" + TMP)):
        os.remove(os.path.join(dest, "kernel.json" + TMP))


def apply(
    mode: str, state: str, suffix: str, env: dict[str, str], unset: list[str], name: str
) -> None:
    dirs, user_kernels = data_dirs()
    src = find_spec(name, dirs)
    original = load_spec(os.path.join(src, "kernel.json"))
    # the copy itself may be named: then it is the one changed
    dest = src if name.endswith(suffix) else os.path.join(user_kernels, name + suffix)
    rec_path = record_path(state, dest)
    rec = load_record(rec_path)
    if mode != "dry-run":
        if os.path.exists(rec_path + TMP):
            os.remove(rec_path + TMP)
        tidy(dest)
    current = read(os.path.join(dest, "kernel.json"))
    if current is not None:
        base = load_spec(os.path.join(dest, "kernel.json"))
    elif os.path.exists(dest):
        raise Refused(f"{dest} exists but holds no kernel.json: move it away first")
    else:
        base = dict(original)
        base["display_name"] = f"{original.get('display_name') or name} (tfdoctor)"
    new = spec_bytes(with_settings(base, env, unset))
    shown = json.loads(new.decode("utf-8")).get("display_name") or os.path.basename(dest)
    where = f"the Jupyter kernel {shown!r} ({dest})"
    if new == current:
        say(f"{where} already holds these settings")
        return
    if mode == "dry-run":
        verb = "would set in" if current is not None else f"would make a copy of {name!r} as"
        say(f"{verb} {where}:")
        for k in sorted(env):
            say(f"  {k}={env[k]}")
        for k in unset:
            say(f"  (remove {k})")
        return
    if rec is None:  # the state before tfdoctor, kept from the first apply on
        before = None if current is None else base64.b64encode(current).decode("ascii")
        rec = {"dest": dest, "before": before}
    rec["written"] = digest(new)
    rec["env"] = dict(env)
    os.makedirs(os.path.dirname(rec_path), exist_ok=True)
    write_whole(rec_path, json.dumps(rec).encode("utf-8"))  # named before it is touched
    if current is None:
        say(f"make {where}, a copy of {name!r} with these settings")
        os.makedirs(user_kernels, exist_ok=True)
        os.makedirs(dest + NEW)
        for item in sorted(os.listdir(src)):
            path = os.path.join(src, item)
            if os.path.isfile(path) and item != "kernel.json":
                shutil.copy2(path, os.path.join(dest + NEW, item))
        write_whole(os.path.join(dest + NEW, "kernel.json"), new)
        os.replace(dest + NEW, dest)
    else:
        say(f"set these settings in {where}")
        mode_bits = os.stat(os.path.join(dest, "kernel.json")).st_mode & 0o7777
        write_whole(os.path.join(dest, "kernel.json"), new, mode_bits)
    say(f"  pick {shown!r} in Jupyter's kernel menu; a running kernel needs a restart")


def undo(state: str) -> None:
    folder = os.path.join(state, "kernels")
    if not os.path.isdir(folder):
        return
    for item in sorted(os.listdir(folder)):
        path = os.path.join(folder, item)
        if item.endswith(TMP):
            os.remove(path)
            continue
        if not item.endswith(".json"):
            continue
        rec = load_record(path)
        assert rec is not None
        dest = rec["dest"]
        tidy(dest)
        kernel_json = os.path.join(dest, "kernel.json")
        current = read(kernel_json)
        before = rec.get("before")
        before_bytes = None if before is None else base64.b64decode(before)
        if current == before_bytes:
            pass  # as it was (an apply killed before it wrote, or undone already)
        elif digest(current) == rec.get("written"):
            if before_bytes is None:
                say(f"remove the kernel copy {dest} (tfdoctor made it)")
                remove_tree(dest)
            else:
                say(f"restore {kernel_json} as it was before tfdoctor")
                write_whole(kernel_json, before_bytes, os.stat(kernel_json).st_mode & 0o7777)
        elif current is not None:
            say(f"take tfdoctor's settings out of {kernel_json} (it changed since)")
            spec = load_spec(kernel_json)
            env = dict(spec.get("env") or {})
            for k, v in (rec.get("env") or {}).items():
                if env.get(k) == v:
                    del env[k]
            spec["env"] = env
            if not env:
                del spec["env"]
            write_whole(kernel_json, spec_bytes(spec), os.stat(kernel_json).st_mode & 0o7777)
        os.remove(path)
    with contextlib.suppress(OSError):
        os.rmdir(folder)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] not in ("dry-run", "--apply", "--undo"):
        say("usage: python - MODE STATE_DIR SUFFIX ENV_JSON [KERNEL]")
        return 2
    mode, state, suffix, settings = argv[:4]
    try:
        if mode == "--undo":
            undo(state)
            return 0
        if len(argv) < 5:
            return 0
        data = json.loads(settings)
        apply(mode, state, suffix, data["env"], data["unset"], argv[4])
    except Refused as exc:
        sys.stderr.write(f"tfdoctor fix script: {exc}\n")
        return 1
    except OSError as exc:
        where = exc.filename or "a kernelspec file"
        sys.stderr.write(f"tfdoctor fix script: {where}: {exc.strerror or exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
