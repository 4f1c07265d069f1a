from memories.management.cli import ProjectCommand, cli_actor
from memories.services.keys import api_key_create


def _names(value: str | None) -> list[str] | None:
    return None if value is None else [item.strip() for item in value.split(",") if item.strip()]


class Command(ProjectCommand):
    help = "Create an API key for the REST and MCP interfaces and print it once (only its hash is stored)."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True, help="who or what uses the key, e.g. 'laptop claude code'")
        parser.add_argument(
            "--scopes", default="read,write", help="comma-separated: read, write, admin (default: read,write)"
        )
        parser.add_argument("--namespaces", help="comma-separated namespaces the key may use (default: all)")
        parser.add_argument(
            "--untrusted",
            action="store_true",
            help="the memories the key creates start as candidates, and it may not promote or archive",
        )

    def handle(self, *args, name: str, scopes: str, namespaces: str | None, untrusted: bool, **options):
        key, token = api_key_create(
            name=name,
            scopes=_names(scopes),
            namespaces=_names(namespaces),
            trusted=not untrusted,
            actor=cli_actor(),
            interface="cli",
        )
        reach = ", ".join(key.namespaces) if key.namespaces is not None else "all namespaces"
        trust = "" if key.trusted else "; untrusted: its new memories are candidates"
        self.stderr.write(
            f"Created API key {key.prefix} '{key.name}' ({', '.join(key.scopes)}; {reach}{trust}). "
            "It is shown only this once:"
        )
        self.stdout.write(token)
