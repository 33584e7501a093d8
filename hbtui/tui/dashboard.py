"""`hbtui` with no verb: build the App over the Service the CLI would use, and run it."""

from __future__ import annotations

import asyncio
import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hbtui.config import Config
    from hbtui.core.service import Service
    from hbtui.paths import Paths
    from hbtui.wiring import EarlyStart


def run_dashboard() -> int:
    """`hbtui` with no verb: the Service the CLI would use, and the App over it.

    The recipe for boxes made here comes from the config or `HBTUI_RECIPE`,
    resolved by the core as for `hbtui new`.
    """
    from hbtui.config import load_config
    from hbtui.paths import resolve_paths
    from hbtui.wiring import EarlyStart

    paths = resolve_paths()
    config = load_config(paths)  # a broken config is one line before the screen changes
    paths.ensure()
    early = EarlyStart(paths, config)  # the first listing runs while the screens import
    try:
        return _run(paths, config, early)
    finally:
        early.close()


def _run(paths: Paths, config: Config, early: EarlyStart) -> int:
    from hbtui.tui.app import HbtuiApp
    from hbtui.tui.terminal import dashboard_driver

    def connect() -> Service:
        # The first frame is up (the first listing asks for the Service): what
        # start-up made lives on, so collections from now on skip it (the CLI
        # turned collection off for the start-up).
        gc.freeze()
        gc.enable()
        from hbtui.core.keys import secrets_passphrase_without_prompt
        from hbtui.wiring import build_service

        # Never a prompt on the terminal: the App asks in a dialog (see _ask_to_unlock).
        return build_service(
            paths, config, secrets_passphrase=secrets_passphrase_without_prompt, early=early
        )

    app = HbtuiApp(connect, config=config, driver_class=dashboard_driver())

    async def run() -> None:
        try:
            await app.run_async()
        finally:
            await app.close_service()

    asyncio.run(run())
    return app.return_code or 0
