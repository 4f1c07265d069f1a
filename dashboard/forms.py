"""The time-travel search form: a query, a namespace and two instants, each typed or picked."""

import re

from django import forms

from memoryproject.exceptions import InvalidInput
from memoryproject.timeparse import parse_instant
from search.engine import MODES

# What an <input type="datetime-local"> sends: a local time without a zone. The page says it is UTC.
_PICKED = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?")
TIMES = ("as_of", "valid_at")


class PickerInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self):
        super().__init__(attrs={"step": "1"})

    def format_value(self, value):
        return value or None


class TimeTravelForm(forms.Form):
    query = forms.CharField(
        required=False, strip=True, widget=forms.TextInput(attrs={"placeholder": "what to recall", "autofocus": True})
    )
    namespace = forms.CharField(
        required=False, strip=True, widget=forms.TextInput(attrs={"list": "namespaces", "placeholder": "all"})
    )
    mode = forms.ChoiceField(choices=[(mode, mode) for mode in MODES], initial="hybrid", required=False)
    as_of = forms.CharField(
        required=False,
        strip=True,
        label="As of (known by)",
        widget=forms.TextInput(attrs={"placeholder": "2025-03-01 or 2025-03-01T09:30Z"}),
    )
    as_of_picker = forms.CharField(required=False, label="or pick (UTC)", widget=PickerInput())
    valid_at = forms.CharField(
        required=False,
        strip=True,
        label="Valid at (true at)",
        widget=forms.TextInput(attrs={"placeholder": "default: the as-of time"}),
    )
    valid_at_picker = forms.CharField(required=False, label="or pick (UTC)", widget=PickerInput())

    def clean(self):
        cleaned = super().clean()
        for name in TIMES:
            typed, picked = cleaned.get(name), cleaned.get(f"{name}_picker")
            cleaned[name] = None
            if typed and picked:
                self.add_error(name, f"{name}: give a typed time or a picked one, not both (they may disagree).")
            elif typed:
                cleaned[name] = self._instant(name, typed)
            elif picked:
                if not _PICKED.fullmatch(picked):
                    self.add_error(name, f"{name}: the picked value {picked!r} is not a date and time.")
                else:
                    # The picker has no zone; the form labels it UTC, so that is what it means.
                    cleaned[name] = self._instant(name, picked + "Z")
        cleaned["mode"] = cleaned.get("mode") or "hybrid"
        return cleaned

    def _instant(self, name: str, value: str):
        try:
            return parse_instant(value, field=name)
        except InvalidInput as error:
            self.add_error(name, error.message)
            return None
