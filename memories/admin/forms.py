"""Admin forms. Each one that writes calls its service from ``clean()``.

The write happens during validation on purpose: the domain errors a service raises
(duplicate content naming its twin, a forgotten memory, a bad date) must come back as
form errors on a 200 page, and ``ModelAdmin.save_model`` runs too late for that. Each
form makes one service call, which is one transaction, so a refused write leaves nothing
behind. The memory pages run it outside any transaction of the admin's (see
``MemoryAdmin.changeform_view``): the service embeds the text before it takes the write lock.
"""

import re

from django import forms
from django.conf import settings

from memories import selectors, services, validation
from memories.models import ApiKey, Kind, Memory, Scope
from memories.services.keys import api_key_create
from memoryproject import dialect
from memoryproject.exceptions import MemoryServiceError
from memoryproject.timeparse import format_instant

_LIST_SEPARATORS = re.compile(r"[,\s]+")

TTL_HELP = (
    "Days from now until this text expires. Blank keeps the current expiry, 0 removes it, N expires it N days from now."
)
TIME_HELP = "YYYY-MM-DD (00:00 UTC) or ISO 8601 with a timezone, e.g. 2026-05-01T09:30:00+00:00."
# change_form.html sizes these to show a whole instant with microseconds (format_instant).
INSTANT_ATTRS = {"class": "vInstantField"}


def admin_actor(request) -> str:
    """The actor the services record for an admin write: ``user:<username>``."""
    return f"user:{request.user.username}"


def split_names(text: str) -> list[str]:
    """Return the names in comma- or space-separated ``text``."""
    return [name for name in _LIST_SEPARATORS.split(text or "") if name]


def add_service_error(form: forms.Form, error: MemoryServiceError, aliases: dict | None = None) -> None:
    """Show a domain error on the field it names, or above the form when the form has no such field."""
    field = (aliases or {}).get(error.field, error.field)
    field = field if field in form.fields else None
    form.add_error(field, error.message)


def _instant_text(value) -> str:
    return format_instant(value) or ""


class ServiceForm:
    """Mixin: ``actor`` is set on the class by ``ModelAdmin.get_form`` (``user:<username>``)."""

    actor = None
    # Service field names that this form shows under another name.
    field_aliases: dict = {}

    def _post_clean(self):
        # No model validation: the service holds every rule (a key that exists is a revision
        # to that memory, not a uniqueness error), and the form's instance is never saved.
        pass

    def run(self, write):
        """Call ``write()``, one service call: its result, or None after turning its error into a form error."""
        try:
            return write()
        except MemoryServiceError as error:
            add_service_error(self, error, self.field_aliases)
            return None


class MemoryAddForm(ServiceForm, forms.ModelForm):
    """A new memory, stored through ``memory_remember`` (which may find the same text already stored)."""

    namespace = forms.CharField(
        max_length=64, initial=settings.MEMORY_DEFAULT_NAMESPACE, help_text="Lowercase letters, digits, '-' or '_'."
    )
    key = forms.CharField(
        required=False,
        max_length=255,
        help_text="Optional stable name, unique in the namespace; generated when blank. "
        "An existing key adds a revision to that memory.",
    )
    kind = forms.ChoiceField(choices=Kind.choices, initial=Kind.NOTE)
    title = forms.CharField(required=False)
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 10, "cols": 90}))
    tags = forms.CharField(required=False, help_text="Comma- or space-separated.")
    source = forms.CharField(required=False, help_text="Where this came from (a URL, a file, a conversation).")
    ttl_days = forms.IntegerField(
        required=False, min_value=0, label="TTL (days)", help_text="Days until this text expires; blank or 0 for never."
    )
    valid_from = forms.CharField(
        required=False,
        widget=forms.TextInput(attrs=INSTANT_ATTRS),
        help_text=f"When the fact starts to hold (default: now). {TIME_HELP}",
    )
    valid_to = forms.CharField(
        required=False,
        widget=forms.TextInput(attrs=INSTANT_ATTRS),
        help_text=f"When it stops holding (default: open). {TIME_HELP}",
    )

    class Meta:
        model = Memory
        fields = []

    result = None

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        self.result = self.run(
            lambda: services.memory_remember(
                namespace=data["namespace"],
                key=data["key"] or None,
                content=data["content"],
                title=data["title"],
                kind=data["kind"],
                tags=split_names(data["tags"]),
                source=data["source"],
                ttl_days=data["ttl_days"],
                valid_from=data["valid_from"] or None,
                valid_to=data["valid_to"] or None,
                actor=self.actor,
                interface="admin",
                force=True,
            )
        )  # a person adding it by hand means it
        return data


class MemoryChangeForm(ServiceForm, forms.ModelForm):
    """The current text and settings of a memory; saving appends a revision and retags through ``memory_update``.

    Only the fields the person changed are passed on, so saving an untouched form
    writes nothing. Tags belong to the memory, not a revision.
    """

    kind = forms.ChoiceField(choices=Kind.choices)
    title = forms.CharField(required=False)
    content = forms.CharField(widget=forms.Textarea(attrs={"rows": 12, "cols": 90}))
    tags = forms.CharField(required=False, help_text="Comma- or space-separated; case does not matter.")
    source = forms.CharField(required=False)
    ttl_days = forms.IntegerField(required=False, min_value=0, label="TTL (days)", help_text=TTL_HELP)
    valid_from = forms.CharField(required=False, widget=forms.TextInput(attrs=INSTANT_ATTRS), help_text=TIME_HELP)
    valid_to = forms.CharField(
        required=False, widget=forms.TextInput(attrs=INSTANT_ATTRS), help_text=f"Blank: open-ended. {TIME_HELP}"
    )

    class Meta:
        model = Memory
        fields = []

    _REVISED = ("content", "title", "source", "kind", "ttl_days", "valid_from", "valid_to")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        memory = self.instance
        self.current = selectors.visible_revision(
            memory=memory, as_of=dialect.now()
        ) or selectors.latest_content_revision(memory)
        self.current_tags = [tag.name for tag in memory.tags.order_by("slug")]
        current = self.current
        self.initial.update(
            kind=memory.kind,
            title=current.title,
            content=current.content,
            source=current.source,
            tags=", ".join(self.current_tags),
            valid_from=_instant_text(current.valid_from),
            valid_to=_instant_text(current.valid_to),
        )
        expiry = _instant_text(current.expires_at) or "never"
        self.fields["ttl_days"].help_text = f"Current expiry: {expiry}. {TTL_HELP}"
        self.fields["valid_from"].help_text = (
            "The validity interval [valid_from, valid_to). Leave both as they are for a plain edit (valid from "
            f"now on); change either to write a bounded correction that applies only inside it. {TIME_HELP}"
        )

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        revise = {}
        changed = set(self.changed_data)
        for name in ("content", "title", "source", "kind"):
            if name in changed:
                revise[name] = data[name]
        if data.get("ttl_days") is not None:
            revise["ttl_days"] = data["ttl_days"]
        if changed & {"valid_from", "valid_to"}:
            # Both ends go together: changing only the end keeps the start the form showed.
            revise["valid_from"] = data["valid_from"] or None
            revise["valid_to"] = data["valid_to"] or None
        wanted = split_names(data["tags"])
        have = {name.casefold() for name in self.current_tags}
        want = {name.casefold() for name in wanted}
        add = [name for name in wanted if name.casefold() not in have]
        remove = [name for name in self.current_tags if name.casefold() not in want]
        revise = {name: value for name, value in revise.items() if value is not None}  # None: carried over
        if revise or add or remove:
            self.run(
                lambda: services.memory_update(
                    memory_id=self.instance.pk,
                    add_tags=add,
                    remove_tags=remove,
                    actor=self.actor,
                    interface="admin",
                    **revise,
                )
            )
        return data


class TagsForm(forms.Form):
    tags = forms.CharField(help_text="One or more tags, comma- or space-separated.")


class MoveForm(forms.Form):
    namespace = forms.CharField(max_length=64, help_text="The namespace to move the selected memories to.")


class ForgetForm(forms.Form):
    reason = forms.CharField(
        required=False,
        max_length=validation.REASON_MAX,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="Why they go. Kept on each tombstone; the history and the timeline show it.",
    )


class StateChangeForm(forms.Form):
    reason = forms.CharField(
        required=False,
        max_length=validation.REASON_MAX,
        widget=forms.TextInput(attrs={"size": 60}),
        help_text="Why. Kept in each memory's history with the new state, who and when.",
    )


class EraseForm(forms.Form):
    reason = forms.CharField(required=False, max_length=500, help_text="Kept on each erasure receipt.")


class ApiKeyCreateForm(ServiceForm, forms.ModelForm):
    """A new API key through ``api_key_create``; the key itself is shown once, on the next page."""

    name = forms.CharField(max_length=100, help_text="Who or what uses the key, e.g. 'laptop claude code'.")
    scopes = forms.MultipleChoiceField(
        choices=Scope.choices, widget=forms.CheckboxSelectMultiple, initial=[Scope.READ, Scope.WRITE]
    )
    namespaces = forms.CharField(
        required=False, help_text="Comma- or space-separated namespaces the key may use; blank for all."
    )
    untrusted = forms.BooleanField(
        required=False,
        help_text=(
            "The memories the key creates start as candidates until a person promotes them, and it may not promote "
            "or archive."
        ),
    )

    class Meta:
        model = ApiKey
        fields = []

    created = None
    token = None
    field_aliases = {"namespace": "namespaces"}  # each name is checked as a namespace

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        result = self.run(
            lambda: api_key_create(
                name=data["name"],
                scopes=data["scopes"],
                namespaces=split_names(data["namespaces"]) or None,
                trusted=not data["untrusted"],
                actor=self.actor,
                interface="admin",
            )
        )
        if result is not None:
            self.created, self.token = result
        return data
