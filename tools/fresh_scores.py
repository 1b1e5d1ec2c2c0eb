"""How the engine of each day scored the corpus logs it had not yet been tuned on.

Every corpus log is diagnosed by the engine of the commit just before the one that added it
(its rules had never seen it), and the answers are scored as tests/perf/bench_corpus.py does.
This is the fairest figure the repository holds of how the engine does on logs like the
held-out ones: the dev score is tuned on, and the sealed part, though never tuned on, was
written against by rules that generalise from dev. Reads only this repository and its git
history (a clean clone has it); each old engine runs in a git worktree in a temporary folder.

Run: .venv/bin/python tools/fresh_scores.py [--since COMMIT] [--json OUT]
  --since: only logs added after this commit (the engine of recent days).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.corpus import ROOT, cases  # noqa: E402
from tests.perf.bench_corpus import top1_right, top3_right  # noqa: E402

# run by the old engine's interpreter: diagnose each log, answer the cause ids in order
RUNNER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from tfdoctor.core.diagnose.engine import diagnose
logs = json.load(open(sys.argv[2], encoding="utf-8"))
out = {}
for key, log in logs.items():
    try:
        out[key] = [c.id for c in diagnose(log.encode()).causes]
    except Exception as exc:
        out[key] = ["crash: " + repr(exc)]
json.dump(out, open(sys.argv[3], "w", encoding="utf-8"))
"""


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True
    ).stdout


def adding_commits(since: str | None) -> list[tuple[str, list[str]]]:
    """Newest first: each commit that added corpus logs, with the logs it added."""
    rel = str(ROOT.relative_to(REPO))
    span = [f"{since}..HEAD"] if since else []
    out = []
    for commit in git("log", "--diff-filter=A", "--format=%H", *span, "--", rel).split():
        added = git("show", "--diff-filter=A", "--name-only", "--format=", commit, "--", rel)
        out.append((commit, [p for p in added.split() if p.endswith(".txt")]))
    return out


def answers_of(commit: str, logs: dict[str, str], work: Path) -> dict[str, list[str]]:
    """What the engine just before this commit answers for these logs."""
    tree = work / commit[:12]
    git("worktree", "add", "--force", "--detach", str(tree), f"{commit}^")
    try:
        pkg = work / f"pkg-{commit[:12]}" / "tfdoctor"
        pkg.mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        for part in ("core", "resources"):
            (pkg / part).symlink_to(tree / part)
        src, dst = work / "logs.json", work / "answers.json"
        src.write_text(json.dumps(logs), encoding="utf-8")
        subprocess.run(
            [sys.executable, "-c", RUNNER, str(pkg.parent), str(src), str(dst)], check=True
        )
        answers: dict[str, list[str]] = json.loads(dst.read_text(encoding="utf-8"))
        return answers
    finally:
        git("worktree", "remove", "--force", str(tree))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--since", help="only logs added after this commit")
    ap.add_argument("--json", type=Path, help="write each log's label and fresh answer here")
    args = ap.parse_args(argv)
    held = {f"{c.part}/{c.name}": c for c in cases()}
    done: dict[str, list[str]] = {}
    try:
        commits = adding_commits(args.since)
    except subprocess.CalledProcessError as exc:
        print(f"fresh_scores: git: {exc.stderr.strip() or exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="tfdoctor-fresh-") as tmp:
        for commit, added in commits:
            # a log added twice (moved, put back) counts at its last adding
            logs = {
                key: held[key].log
                for p in added
                if (key := "/".join(Path(p).parts[-2:])) in held and key not in done
            }
            if logs:
                done.update(answers_of(commit, logs, Path(tmp)))
                print(f"{commit[:10]}: {len(logs)} logs", file=sys.stderr)
    table: dict[str, list[int]] = {}
    for key, got in done.items():
        case = held[key]
        row = table.setdefault(case.part, [0, 0, 0, 0])
        row[0] += top1_right(case.want, got)
        row[1] += top3_right(case.want, got)
        row[2] += 1
        row[3] += any(g.startswith("crash: ") for g in got)
    for part, (first, three, n, crashed) in sorted(table.items()):
        print(
            f"{part:6}: {n} logs, fresh top-1 {first / n:.3f} ({first}/{n}), "
            f"top-3 {three / n:.3f}, crashed {crashed}"
        )
    if args.json:
        rows = {k: {"want": held[k].want, "got": v} for k, v in sorted(done.items())}
        args.json.write_text(json.dumps(rows, indent=1) + os.linesep, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
