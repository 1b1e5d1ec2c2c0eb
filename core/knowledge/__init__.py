"""Knowledge base: compat tables, fix catalog, crash causes and log signatures (validated TOML).

The data files live in this folder; each module loads one of them through the one validated
loader (:mod:`.loader`), and a file that names an id of another (a cause's fixes, a
signature's causes) is cross-checked against it at load time.
"""

from __future__ import annotations

from tfdoctor.core.knowledge.base import KnowledgeBase, load_all
from tfdoctor.core.knowledge.compat import Compat, Platform
from tfdoctor.core.knowledge.compat_load import COMPAT_FILE, load, load_from
from tfdoctor.core.knowledge.compat_types import (
    Architecture,
    CcProblem,
    CcSupport,
    CcVerdict,
    CudaDriverRow,
    DriverReq,
    EnvVarFact,
    MinorCompat,
    TfBuild,
)
from tfdoctor.core.knowledge.loader import KnowledgeError

__all__ = [
    "COMPAT_FILE",
    "Architecture",
    "CcProblem",
    "CcSupport",
    "CcVerdict",
    "Compat",
    "CudaDriverRow",
    "DriverReq",
    "EnvVarFact",
    "KnowledgeBase",
    "KnowledgeError",
    "MinorCompat",
    "Platform",
    "TfBuild",
    "load",
    "load_all",
    "load_from",
]
