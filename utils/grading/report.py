"""Which questions did the class get wrong? A report from the gradebook.

    python -m utils.grading.report [LESSON ...] [--out reports/class-report.png] [--db-url URL]

For each lesson and graded cell: the number of graded submissions, the mean score (points and
share of the maximum) and the share of students with full marks, hardest first (lowest mean
share). Printed as a table, written as reports/class-report.csv, and drawn as a bar chart
(reports/class-report.png). Reads SQLite gradebook.db or the db_url in nbgrader_config.py.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path

from utils.lessons import REPO
from utils.scores import CellScore, read_scores_url
from utils.grading.settings import course_settings


@dataclass
class CellStats:
    lesson: str
    cell: str
    submissions: int
    max_score: float
    mean_score: float
    full_marks: float   # share of submissions with full marks, 0..1

    @property
    def mean_share(self) -> float:
        return self.mean_score / self.max_score if self.max_score else 1.0


def class_stats(rows: list[CellScore]) -> list[CellStats]:
    """Per (lesson, graded cell) statistics, hardest first; ties in lesson and cell order."""
    groups: dict[tuple[str, str], list[CellScore]] = {}
    for r in rows:
        groups.setdefault((r.lesson, r.cell), []).append(r)
    stats = []
    for (lesson, cell), scores in groups.items():
        n = len(scores)
        max_score = max(s.max_score for s in scores)
        stats.append(CellStats(lesson, cell, n, max_score, sum(s.score for s in scores) / n,
                               sum(1 for s in scores if s.score >= s.max_score) / n))
    stats.sort(key=lambda s: (s.mean_share, s.full_marks, s.lesson, s.cell))
    return stats


def stats_table(stats: list[CellStats]) -> str:
    if not stats:
        return "(no graded submissions)"
    width = max(len(f"{s.lesson}/{s.cell}") for s in stats) + 2
    lines = ["cell".ljust(width) + "subs".rjust(6) + "mean".rjust(14) + "mean %".rjust(9) + "full marks".rjust(12)]
    for s in stats:
        lines.append(f"{s.lesson}/{s.cell}".ljust(width) + f"{s.submissions}".rjust(6)
                     + f"{s.mean_score:.2f}/{s.max_score:g}".rjust(14) + f"{100 * s.mean_share:.0f}%".rjust(9)
                     + f"{100 * s.full_marks:.0f}%".rjust(12))
    return "\n".join(lines)


def write_csv(stats: list[CellStats], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["lesson", "cell", "submissions", "max_score", "mean_score", "mean_share", "full_marks_share"])
        for s in stats:
            w.writerow([s.lesson, s.cell, s.submissions, s.max_score, round(s.mean_score, 4),
                        round(s.mean_share, 4), round(s.full_marks, 4)])
    return path


def plot(stats: list[CellStats], path: Path, title: str = "Class report: hardest questions first") -> Path:
    """Horizontal bars: mean score share and full-marks share per graded cell, hardest on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    labels = [f"{s.lesson}/{s.cell}" for s in stats]
    height = max(3.0, 0.5 * len(stats) + 1.6)
    fig, ax = plt.subplots(figsize=(9, height))
    y = list(range(len(stats)))
    mean = ax.barh([i - 0.2 for i in y], [100 * s.mean_share for s in stats], height=0.4,
                   label="mean score (% of max)", color="#4C72B0")
    full = ax.barh([i + 0.2 for i in y], [100 * s.full_marks for s in stats], height=0.4,
                   label="students with full marks (%)", color="#DD8452")
    for bars in (mean, full):
        ax.bar_label(bars, fmt="%.0f%%", padding=2, fontsize="x-small")
    ax.set_yticks(y, labels)
    ax.invert_yaxis()  # hardest first, at the top
    ax.set_xlim(0, 108)
    ax.set_xlabel("percent")
    n = max((s.submissions for s in stats), default=0)
    ax.set_title(f"{title} ({n} submissions)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / height), ncol=2, fontsize="small",
              frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def report(root: Path = REPO, names: list[str] | None = None, out: Path | None = None,
           db_url: str | None = None) -> tuple[str, list[CellStats], Path | None]:
    """(table, stats, image path) for the named lessons (all when none)."""
    settings = course_settings(root, db_url)
    rows = read_scores_url(settings.db_url, settings.course_id, names or None)
    stats = class_stats(rows)
    image = None
    if stats:
        out = Path(out) if out else Path(root) / "reports" / "class-report.png"
        image = plot(stats, out)
        write_csv(stats, out.with_suffix(".csv"))
    return stats_table(stats), stats, image


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", help="lessons (default: all in the gradebook)")
    parser.add_argument("--out", type=Path, default=None, help="image path (default: reports/class-report.png)")
    parser.add_argument("--db-url", default=None)
    parser.add_argument("--course", type=Path, default=REPO, help="course directory (default: this repository)")
    args = parser.parse_args(argv)
    table, stats, image = report(args.course, args.lessons, args.out, args.db_url)
    print(table)
    if image:
        print(f"wrote {image} and {image.with_suffix('.csv')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
