"""What a pull, keep or pr brought into the host repository (and pushed): the
notification it ends with."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hbtui.core.work import PrResult, PullResult


def _pulled(result: PullResult) -> str:
    if not result.refs:
        said = f"{result.box} has no commits since its seed; nothing pulled"
    else:
        said = "\n".join(f"{ref} → {sha[:12]}" for ref, sha in result.refs)
        said += f"\nin {result.repo}"
    if result.uncommitted and not result.wip:
        said += f"\n{result.uncommitted} file(s) uncommitted in the box, not pulled"
    return said


def landed(result: object) -> str:
    """What a pull or keep brought into the host repository, for its notification."""
    from hbtui.core.work import PullResult

    if isinstance(result, PullResult):
        return _pulled(result)
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], PullResult):
        removed = ", ".join(result[1]) or "nothing"
        return f"{_pulled(result[0])}\nremoved {removed}"
    return "done"


def pushed(result: PrResult) -> str:
    """What a pr pushed, and the pull request it opened (or the command that opens it)."""
    said = (
        f"{result.branch} → {result.remote} ({result.pushed}): {len(result.commits)} "
        f"commit(s), {result.commit[:12]}"
    )
    if result.url:
        return f"{said}\n{result.url}"
    return f"{said}\n{result.no_gh}; to open the pull request:\n{result.command}"
