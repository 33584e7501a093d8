"""Instant-box verbs: base build/ls/rm/verify, and branch."""

from __future__ import annotations

import sys
from pathlib import Path

from hbtui.cli.ask import confirm_ending
from hbtui.cli.output import Invocation, table
from hbtui.core.agents import Ending
from hbtui.errors import UsageError
from hbtui.names import host_flag
from hbtui.present import age, human_bytes


def _recipe(inv: Invocation) -> Path | None:
    return Path(inv.args.recipe) if getattr(inv.args, "recipe", None) else None


def cmd_branch(inv: Invocation) -> int:
    a = inv.args
    if a.count is None and a.check is not None:
        raise UsageError("--check runs in each box of a try: it needs --count N")
    if a.count is None and a.name is None:
        raise UsageError("branch SRC NAME, or branch SRC [NAME] --count N [--check CMD]")
    confirm_ending(inv, Ending.BRANCH, a.source, answered=a.yes)
    if a.count is not None:
        from hbtui.cli.work import branch_ways

        return branch_ways(inv)
    with inv.reporter() as rep:
        view = inv.call(
            inv.service.branch(
                a.source,
                a.name,
                inv.host,
                port=a.port,
                branchable=a.branchable,
                setup=not a.no_setup,
                report=rep,
            )
        )
        rep.finish_steps()
    inv.show(
        view.to_json(),
        f"✓ box {view.name} (branched from {a.source}) is {view.state} on port {view.port}",
    )
    return 0


def cmd_base_build(inv: Invocation) -> int:
    with inv.reporter() as rep:
        base = inv.call(
            inv.service.bases.build(
                host=inv.host, image=inv.args.image, recipe=_recipe(inv), report=rep
            )
        )
        rep.finish_steps()
    inv.show(
        base.to_json(),
        f"✓ base {base.id} ({human_bytes(base.size)}); new boxes of {base.image} with this "
        f"recipe are made from it: hbtui new NAME{host_flag(base.host)}",
    )
    return 0


def cmd_base_ls(inv: Invocation) -> int:
    bases = inv.service.bases.listing(inv.args.host)
    for path in inv.service.bases.damaged(inv.args.host):
        print(
            f"! {path} is not a base manifest (damaged?): its base is not listed and its pack "
            "is kept; restore the file, or remove it and the base's folder",
            file=sys.stderr,
        )
    inv.show(
        [b.to_json() for b in bases],
        lambda: table(
            ("BASE", "HOST", "IMAGE", "RECIPE", "SIZE", "ENGINE", "BUILT"),
            [
                (b.id, b.host, b.image, b.recipe, human_bytes(b.size), b.engine, age(b.created))
                for b in bases
            ],
        ),
        empty="No bases yet. Build one: hbtui base build",
    )
    return 0


def cmd_base_rm(inv: Invocation) -> int:
    base = inv.call(inv.service.bases.remove(inv.args.id, inv.host))
    return inv.done(f"removed the base {base.id} ({human_bytes(base.size)} freed)")


def cmd_base_verify(inv: Invocation) -> int:
    checks = inv.call(inv.service.bases.verify(inv.args.id, inv.host))
    inv.show(
        [c.to_json() for c in checks],
        lambda: "\n".join(
            f"{'✗' if c.problem else '✓'} {c.base.id}: {c.problem or 'the pack matches'}"
            for c in checks
        ),
        empty="No bases to verify. Build one: hbtui base build",
    )
    return 1 if any(c.problem for c in checks) else 0
