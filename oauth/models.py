"""How the admin names django-oauth-toolkit's rows: clients, and the grants people approved (live refresh tokens)."""

from oauth2_provider.models import Application, RefreshToken


class Client(Application):
    class Meta:
        proxy = True
        verbose_name = "OAuth client"


class Grant(RefreshToken):
    """One approval in use: the live refresh token of a client for a person, and the access token issued with it."""

    class Meta:
        proxy = True
        verbose_name = "OAuth grant"
