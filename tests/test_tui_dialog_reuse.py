"""What opening dialogs costs over a session: a closed dialog leaves nothing alive behind it,
and the New dialog, composed once and opened again, shows what a new one would."""

from __future__ import annotations

import gc

import pytest
from textual._styles_cache import StylesCache

from hbtui.tui.app import HbtuiApp

from support.pilot import make_app, settled, until
from tui_fakes import FakeService


def live_styles_caches() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, StylesCache))


async def open_and_close(pilot, app: HbtuiApp, key: str) -> None:
    await pilot.press(key)
    await until(pilot, lambda: app.screen is not app.main, what=f"the screen of {key}")
    await settled(pilot)
    await pilot.press("escape")
    await until(pilot, lambda: app.screen is app.main, what="the main screen again")
    await settled(pilot)


@pytest.mark.parametrize("key", ["n", "w", "question_mark"])
async def test_a_closed_dialog_keeps_nothing_alive(key):
    """Textual keeps every widget's render cache (its drawn lines) in a class-wide cache of
    1,024 entries (Textualize/textual#6665): each dialog opened left ~4,000 objects alive,
    and the garbage collector's full passes, which walk them all, grew to 200+ ms that
    landed on whatever key came next. Closed, a dialog leaves none of them."""
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")
        await open_and_close(pilot, app, key)  # the first: imports, the stylesheet
        before = live_styles_caches()
        for _ in range(5):
            await open_and_close(pilot, app, key)
        # A dialog has 10 to 40 widgets: five of them kept would be 50 or more.
        assert live_styles_caches() - before < 10
