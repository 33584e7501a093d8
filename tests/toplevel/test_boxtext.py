"""The one door for box text (hbtui.boxtext): nothing that passes it acts on the host."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hbtui import boxtext

from support.hostile import BIDI, CORPUS, CR, EVERYTHING, HUGE_SGR, OSC8, OSC52, unsafe


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_every_hostile_string_comes_out_plain(name: str) -> None:
    text = CORPUS[name]
    assert unsafe(boxtext.line(text)) == []
    assert unsafe(boxtext.lines(text)) == []
    assert unsafe(boxtext.colours(text), colours=True) == []
    assert "\n" not in boxtext.line(text)


def test_strings_that_act_on_the_terminal_leave_nothing_of_their_payload() -> None:
    assert boxtext.line(f"a{OSC52}b") == "ab"
    assert "evil.example" not in boxtext.lines(OSC8)
    assert boxtext.lines(OSC8) == "https://github.com/org/repo"


def test_a_colour_with_a_huge_parameter_is_dropped_and_its_text_kept() -> None:
    assert boxtext.colours(HUGE_SGR) == "big"
    kept = "\x1b[38;2;255;128;0mok\x1b[0m"
    assert boxtext.colours(kept) == kept
    assert boxtext.lines(kept) == "ok"


def test_bidi_overrides_and_isolates_are_removed() -> None:
    assert boxtext.line(BIDI) == "evil iso"


def test_a_carriage_return_cannot_draw_over_what_came_before() -> None:
    assert boxtext.lines(CR) == "safe text\nEVIL"
    assert boxtext.line(CR) == "safe text EVIL"
    assert boxtext.lines("a\r\nb") == "a\nb"


def test_markup_is_left_as_text_for_the_front_end_to_show_plainly() -> None:
    assert boxtext.line("[/] and [@click=app.quit]x[/]") == "[/] and [@click=app.quit]x[/]"


def test_line_is_cut_at_its_limit() -> None:
    assert boxtext.line("abcdef", limit=4) == "abc…"
    assert boxtext.line("abc", limit=4) == "abc"


def test_tabs_and_newlines_survive_in_lines() -> None:
    assert boxtext.lines("a\tb\nc") == "a\tb\nc"
    assert boxtext.line("a\tb\nc") == "a b c"


def test_everything_at_once() -> None:
    assert unsafe(boxtext.colours(EVERYTHING), colours=True) == []
    assert unsafe(boxtext.lines(EVERYTHING)) == []


@given(
    st.text(
        alphabet=st.sampled_from(list("\x1b[]P\\^_X;:0123456789m?\x07\x9b\x9d\r\n a")), max_size=60
    )
)
def test_no_input_leaves_an_escape_that_acts(text: str) -> None:
    assert unsafe(boxtext.line(text)) == []
    assert unsafe(boxtext.lines(text)) == []
    assert unsafe(boxtext.colours(text), colours=True) == []


def test_characters_that_show_nothing_are_removed_and_joiners_kept() -> None:
    hidden = "r\u200bm -r\u2060f /\ufeff \u200e\u200fx\U000e0041\U000e007f"
    assert boxtext.line(hidden) == "r m -r f / x"
    assert boxtext.line("👩\u200d💻 \u200cx") == "👩\u200d💻 \u200cx"


def test_an_event_s_words_are_one_plain_line_as_it_is_made() -> None:
    """The dashboard made an operation's events plain as they came in, and the CLI as it
    printed them: the event makes its words one plain line once, for every front end (a
    step's name, as a step marker gave it, cut at 200 characters)."""
    from dataclasses import replace

    from hbtui.events import Notice, Phase, Step

    made = [
        Phase(EVERYTHING).message,
        Notice(EVERYTHING).message,
        Step(1, 2, EVERYTHING).name,
        replace(Phase("reserving a port"), message=EVERYTHING).message,
    ]
    for words in made:
        assert unsafe(words) == [] and "\n" not in words, words
    assert made[0] == boxtext.line(EVERYTHING)
    assert Step(1, 2, "s" * 500).name == "s" * 199 + "…"
