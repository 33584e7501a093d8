"""The dashboard never reads the terminal for the secrets file's passphrase: a keyed box
on the encrypted file store, with HBTUI_SECRETS_PASSPHRASE unset, asks in a dialog while
the event loop goes on (a prompt on /dev/tty there would stop it), against the simulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, Label

from hbtui.core.foundation.specs import NewSpec
from hbtui.core.keys import passphrase
from hbtui.core.keys.passphrase import secrets_passphrase_without_prompt
from hbtui.tui.dialogs.secrets import SecretsPassphraseDialog
from hbtui.wiring import build_service

from support import SIM_RECIPE
from support.pilot import SIZE, make_app, until

pytestmark = pytest.mark.sim


@pytest.fixture
def no_secrets_passphrase(sim_env, monkeypatch):
    """The file store, no passphrase in the environment nor stashed by an earlier test."""
    home = Path(sim_env["HBTUI_HOME"])
    (home / "config.toml").write_text('[secrets]\nstore = "file"\n')
    monkeypatch.setenv("HBTUI_RECIPE", str(SIM_RECIPE))
    monkeypatch.delenv("HBTUI_SECRETS_PASSPHRASE", raising=False)
    passphrase._forget()
    yield
    passphrase._forget()


async def test_starting_a_keyed_box_asks_for_the_passphrase_in_a_dialog(no_secrets_passphrase):
    setup = build_service(secrets_passphrase=lambda _confirm: b"right")
    setup.secrets.set("anthropic", "sk-ant-test")
    await setup.new(NewSpec("keyed", credentials=("anthropic",)))
    await setup.boxes.stop("keyed")

    service = build_service(secrets_passphrase=secrets_passphrase_without_prompt)
    app = make_app(service, refresh=60)
    ticks: list[int] = []
    async with app.run_test(size=SIZE) as pilot:
        app.set_interval(0.02, lambda: ticks.append(1))
        await until(pilot, lambda: app.main.table.selected_key() == ("local", "keyed"))
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, SecretsPassphraseDialog), 30)
        dialog = app.screen
        seen = len(ticks)
        await until(pilot, lambda: len(ticks) >= seen + 5, what="the loop to keep ticking")
        assert app.activities[("local", "keyed")].failure is None  # waiting, not failed

        dialog.query_one("#passphrase", Input).value = "wrong"
        await pilot.press("enter")
        error = dialog.query_one("#error", Label)
        await until(pilot, lambda: "cannot be read" in str(error.render()), 30)
        assert app.screen is dialog  # a wrong passphrase is said where it was typed

        dialog.query_one("#passphrase", Input).value = "right"
        await pilot.press("enter")
        await until(pilot, lambda: app.screen is not dialog, 30, what="the dialog to close")
        activity = app.activities[("local", "keyed")]
        await until(
            pilot,
            lambda: not activity.running and "start done" in activity.lines[-1],
            60,
            what="the start, run again once unlocked",
        )
