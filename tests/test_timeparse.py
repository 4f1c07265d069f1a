import datetime as dt

import pytest

from memoryproject.exceptions import InvalidInput
from memoryproject.timeparse import format_instant, parse_instant

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01", dt.datetime(2024, 5, 1, tzinfo=UTC)),
        ("2024-05-01T09:30:00Z", dt.datetime(2024, 5, 1, 9, 30, tzinfo=UTC)),
        ("2024-05-01T09:30Z", dt.datetime(2024, 5, 1, 9, 30, tzinfo=UTC)),
        ("2024-05-01 09:30:00.5+02:00", dt.datetime(2024, 5, 1, 7, 30, 0, 500000, tzinfo=UTC)),
        ("2024-05-01T00:10:00.123456-05:30", dt.datetime(2024, 5, 1, 5, 40, 0, 123456, tzinfo=UTC)),
        ("2024-05-01T09:30:00+0100", dt.datetime(2024, 5, 1, 8, 30, tzinfo=UTC)),
        ("9999-12-31T23:59:59.999999Z", dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ],
)
def test_accepted_forms_normalise_to_utc_microseconds(text, expected):
    parsed = parse_instant(text, field="as_of")
    assert parsed == expected
    assert parsed.utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2024-05-01T09:30:00", "no timezone"),
        ("yesterday", "not a date"),
        ("2024-5-1", "not a date"),
        ("2024-02-30", "not a real date"),
        ("2024-05-01T25:00:00Z", "not a real date"),
        ("2024-05-01T09:30:00.1234567Z", "sub-microsecond"),
        ("0001-01-01T00:30:00+01:00", "outside years"),
        ("9999-12-31T23:30:00-01:00", "outside years"),
        ("2024-05-01T09:30:00+24:00", "impossible timezone"),
        ("", "not a date"),
        ("1714555800", "not a date"),
    ],
)
def test_rejected_forms_name_the_field_and_the_value(text, reason):
    with pytest.raises(InvalidInput) as caught:
        parse_instant(text, field="valid_at")
    assert caught.value.field == "valid_at"
    assert reason in caught.value.message
    assert text == "" or repr(text) in caught.value.message


def test_naive_datetimes_and_non_strings_are_rejected():
    with pytest.raises(InvalidInput, match="no timezone"):
        parse_instant(dt.datetime(2024, 1, 1), field="as_of")
    with pytest.raises(InvalidInput, match="expected a date string, got int"):
        parse_instant(1714555800, field="as_of")


def test_formatting_is_canonical_utc_with_microseconds_and_padded_years():
    assert format_instant(parse_instant("0099-01-02T03:04:05+00:00", field="t")) == "0099-01-02T03:04:05.000000Z"
    assert format_instant(parse_instant("2024-05-01T01:00:00+02:00", field="t")) == "2024-04-30T23:00:00.000000Z"
    assert format_instant(None) is None
