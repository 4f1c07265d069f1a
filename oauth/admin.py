"""OAuth clients and grants in the admin, in place of django-oauth-toolkit's pages: listed, and revoked or removed
through ``oauth.services`` (with an audit event), never edited by hand."""

from django.contrib import admin, messages
from django.db import transaction
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from memories.admin.forms import admin_actor
from memoryproject.exceptions import MemoryServiceError
from oauth.models import Client, Grant
from oauth.scopes import read_scope
from oauth.services import oauth_client_remove, oauth_grant_revoke

for model in (
    get_application_model(),
    get_access_token_model(),
    get_refresh_token_model(),
    get_grant_model(),
    get_id_token_model(),
):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


class _ListOnly(admin.ModelAdmin):
    """Rows the OAuth flows write: people read and revoke them, never add or edit them."""

    def has_add_permission(self, request):
        return False

    def each(self, request, queryset, act, *, done: str, undone: str) -> None:
        """``act`` on each selected row's id in one transaction (all or none), and say how it went."""
        ids = list(queryset.order_by("pk").values_list("pk", flat=True))
        try:
            with transaction.atomic():
                for row_id in ids:
                    act(row_id)
        except MemoryServiceError as error:
            self.message_user(request, f"Nothing was {undone}: {error.message}", messages.ERROR)
            return
        self.message_user(request, done.format(len(ids), "" if len(ids) == 1 else "s"), messages.SUCCESS)

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request)


@admin.register(Client)
class ClientAdmin(_ListOnly):
    list_display = ("name", "client_id", "client_type", "redirect_uris", "registration_source", "created")
    list_filter = ("registration_source", "client_type")
    search_fields = ("name", "client_id")
    fields = list_display
    readonly_fields = list_display
    actions = ("remove_clients",)

    def has_delete_permission(self, request, obj=None):
        return False  # removal goes through the action, which records it

    @admin.action(description="Remove selected clients and revoke their grants", permissions=["change"])
    def remove_clients(self, request, queryset):
        def remove(application_id):
            oauth_client_remove(application_id=application_id, actor=admin_actor(request), interface="admin")

        self.each(request, queryset, remove, done="Removed {} client{}; their tokens now fail.", undone="removed")


@admin.register(Grant)
class GrantAdmin(_ListOnly):
    list_display = ("pk", "user", "application", "access", "namespaces", "created", "updated")
    list_select_related = ("user", "application")
    search_fields = ("application__name", "application__client_id", "user__username")
    fields = ("user", "application", "access", "namespaces", "resource", "created", "updated")
    readonly_fields = fields
    actions = ("revoke_grants",)

    def get_queryset(self, request):
        return super().get_queryset(request).filter(revoked__isnull=True).select_related("access_token")

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="access")
    def access(self, grant):
        scope = grant.access_token.scope if grant.access_token else ""
        return ", ".join(sorted(read_scope(scope)[0])) or "none"

    @admin.display(description="namespaces")
    def namespaces(self, grant):
        scope = grant.access_token.scope if grant.access_token else ""
        return ", ".join(read_scope(scope)[1]) or "none"

    @admin.action(description="Revoke selected grants", permissions=["change"])
    def revoke_grants(self, request, queryset):
        def revoke(grant_id):
            oauth_grant_revoke(refresh_token_id=grant_id, actor=admin_actor(request), interface="admin")

        done = "Revoked {} grant{}; the client's next request fails."
        self.each(request, queryset, revoke, done=done, undone="revoked")
