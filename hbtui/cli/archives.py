"""Archive verbs: save load extract verify, and `archive info`.

The passphrase comes from the environment or a no-echo prompt (never argv);
every check that needs no passphrase runs before the prompt.
"""

from __future__ import annotations

from pathlib import Path

from hbtui.cli.output import Invocation
from hbtui.core.foundation import LoadSpec, SaveSpec
from hbtui.core.keys import get_passphrase
from hbtui.errors import UsageError


def _archive(inv: Invocation) -> Path:
    return Path(inv.args.file).expanduser()


def cmd_save(inv: Invocation) -> int:
    a = inv.args
    if a.output is not None and not a.output.strip():
        raise UsageError("-o needs a file name (leave it out for the backups folder)")
    service = inv.service  # a bad config fails before the passphrase is asked for
    passphrase = get_passphrase(confirm=True)
    output = Path(a.output) if a.output else None
    with inv.reporter() as rep:
        path = inv.call(
            service.archives.save(
                SaveSpec(a.name, inv.host, output=output, verify=not a.no_verify),
                passphrase=passphrase,
                report=rep,
            )
        )
    size = path.stat().st_size
    inv.show(
        {"box": a.name, "archive": str(path), "bytes": size},
        f"✓ saved {a.name} to {path} ({size:,} bytes)",
    )
    return 0


def cmd_load(inv: Invocation) -> int:
    a = inv.args
    inv.service.archives.kind(_archive(inv))  # a missing or foreign file fails before the prompt
    passphrase = get_passphrase(confirm=False)
    recipe = Path(a.recipe) if a.recipe else None
    repo = Path(a.repo).expanduser() if a.repo else None
    with inv.reporter() as rep:
        view = inv.call(
            inv.service.archives.load(
                LoadSpec(_archive(inv), a.name, inv.host, recipe=recipe, repo=repo),
                passphrase=passphrase,
                report=rep,
            )
        )
        rep.finish_steps()
    inv.show(view.to_json(), f"✓ loaded {a.file} into box {view.name}; executor: {view.url}")
    return 0


def cmd_extract(inv: Invocation) -> int:
    a = inv.args
    inv.service.archives.kind(_archive(inv))
    passphrase = get_passphrase(confirm=False)
    dest = Path(a.dir) if a.dir else None
    with inv.reporter() as rep:
        where = inv.call(
            inv.service.archives.extract(_archive(inv), dest, passphrase=passphrase, report=rep)
        )
    return inv.done(f"extracted into {where}")


def cmd_verify(inv: Invocation) -> int:
    inv.service.archives.kind(_archive(inv), hbx_only=True)
    passphrase = get_passphrase(confirm=False)
    with inv.reporter() as rep:
        size = inv.call(
            inv.service.archives.verify(_archive(inv), passphrase=passphrase, report=rep)
        )
    return inv.done(f"{inv.args.file}: every chunk authentic ({size:,} bytes of payload)")


def cmd_archive_info(inv: Invocation) -> int:
    data = inv.service.archives.info(_archive(inv))
    inv.show(data, "\n".join(f"{key:>15}: {value}" for key, value in data.items()))
    return 0
