"""API keys in the admin: created through ``api_key_create`` (the form), shown once, revoked, never edited."""

from django.contrib import admin, messages
from django.db import transaction
from django.template.response import TemplateResponse

from memories.admin.forms import ApiKeyCreateForm, admin_actor
from memories.models import ApiKey
from memories.services.keys import api_key_revoke
from memoryproject.exceptions import MemoryServiceError


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "prefix",
        "scope_list",
        "namespace_list",
        "trusted",
        "created_at",
        "created_by",
        "last_used_at",
        "revoked_at",
    )
    list_filter = (("revoked_at", admin.EmptyFieldListFilter), "trusted")
    search_fields = ("name", "prefix")
    actions = ("revoke_keys",)
    # Never secret_hash: it is not the key, but there is nothing to gain from showing it.
    shown = (
        "name",
        "prefix",
        "scope_list",
        "namespace_list",
        "trusted",
        "created_at",
        "created_by",
        "last_used_at",
        "revoked_at",
    )

    def get_fields(self, request, obj=None):
        return ("name", "scopes", "namespaces", "untrusted") if obj is None else self.shown

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.shown

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = ApiKeyCreateForm
        form = super().get_form(request, obj, change=change, **kwargs)
        form.actor = admin_actor(request)
        return form

    def has_change_permission(self, request, obj=None):
        # Keys are never edited: the list (and its revoke action) needs the permission, a key's page is read-only.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request, obj=None):
        return False  # a revoked key stays, so the audit trail can name it

    def save_form(self, request, form, change):
        return form.created

    def save_model(self, request, obj, form, change):
        # api_key_create wrote the row from the form's clean(); the plaintext rides on this
        # in-memory instance to the response and is never stored.
        obj.plaintext = form.token

    def save_related(self, request, form, formsets, change):
        pass

    def response_add(self, request, obj, post_url_continue=None):
        """Show the key on this response only: no later page can show it."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "API key created",
            "key": obj,
            "token": obj.plaintext,
        }
        return TemplateResponse(request, "admin/memories/apikey/created.html", context)

    @admin.display(description="scopes")
    def scope_list(self, key):
        return ", ".join(key.scopes)

    @admin.display(description="namespaces")
    def namespace_list(self, key):
        return ", ".join(key.namespaces) if key.namespaces is not None else "all"

    @admin.action(description="Revoke selected API keys", permissions=["change"])
    def revoke_keys(self, request, queryset):
        try:
            with transaction.atomic():
                keys = [
                    api_key_revoke(prefix=prefix, actor=admin_actor(request), interface="admin")
                    for prefix in queryset.order_by("pk").values_list("prefix", flat=True)
                ]
        except MemoryServiceError as error:
            self.message_user(request, f"Nothing was revoked: {error.message}", messages.ERROR)
            return
        self.message_user(
            request,
            f"Revoked {len(keys)} API key{'' if len(keys) == 1 else 's'}: "
            f"{', '.join(key.prefix for key in keys)}. Requests with them now fail.",
            messages.SUCCESS,
        )
