"""Causes -> fixes -> targets and scripts: the plan of a fix and where it is applied
(`apply`, transactional with undo), which fixes to propose with measured values (`propose`),
and the scripts to take to another machine (`export`)."""

from tfdoctor.core.fixes.apply import (
    ENV_BLOCK_BEGIN,
    Plan,
    apply_to_conda,
    apply_to_env_file,
    apply_to_kernelspec,
    commands_for,
    contradiction,
    env_file_text,
    plan,
    preamble_text,
    stop_process,
)
from tfdoctor.core.fixes.transaction import (
    FixError,
    edited_since_apply,
    history,
    recover,
    undo,
)

__all__ = [
    "ENV_BLOCK_BEGIN",
    "FixError",
    "Plan",
    "apply_to_conda",
    "apply_to_env_file",
    "apply_to_kernelspec",
    "commands_for",
    "contradiction",
    "edited_since_apply",
    "env_file_text",
    "history",
    "plan",
    "preamble_text",
    "recover",
    "stop_process",
    "undo",
]
