import pytest

from hbtui.errors import UsageError
from hbtui.names import MAX_LEN, check_name, name_problem

BAD = [
    "a;b",
    "../x",
    "a b",
    "x" * 200,
    "-rf",
    "",
    "A",
    "1box",
    "a--b",
    "a-",
    "a.b",
    "é",
    "a_b",
    "box/1",
    "$(id)",
    "x" * (MAX_LEN + 1),
]
GOOD = ["b1", "my-box", "a", "x" * MAX_LEN, "web-2-dev"]


@pytest.mark.parametrize("name", BAD)
def test_bad_names_are_refused_with_a_reason(name):
    assert name_problem(name)
    with pytest.raises(UsageError, match="invalid box name"):
        check_name(name)


@pytest.mark.parametrize("name", GOOD)
def test_good_names_pass(name):
    assert name_problem(name) is None
    assert check_name(name) == name
