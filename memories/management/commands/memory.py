import json
import re
import sys
from functools import partial

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db.utils import OperationalError

from memories import selectors, services
from memories.management.cli import cli_actor
from memories.selectors import LIST_STATES
from memoryproject.exceptions import InvalidInput, MemoryServiceError

# "argument --ttl-days: invalid int value: 'x'" names the option; it becomes the field.
_ARGUMENT = re.compile(r"argument (?:\S+/)?-*([\w-]+):")
_REQUIRED = re.compile(r"the following arguments are required: -*([\w-]+)")


def _usage_error(prog: str, message: str):
    """Raise argparse's complaint as InvalidInput, so it prints as JSON like every other error."""
    match = _ARGUMENT.match(message) or _REQUIRED.match(message)
    field = match.group(1).replace("-", "_") if match else None
    raise InvalidInput(f"{message}. Run '{prog} --help' for usage.", field=field)


def _given(**values) -> dict:
    """Drop options left unset, so the service's own defaults apply."""
    return {name: value for name, value in values.items() if value is not None}


class Command(BaseCommand):
    help = "Remember, read, forget and restore memories from the shell; answers are JSON."

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.error = partial(_usage_error, parser.prog)
        return parser

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="command", metavar="command", required=True)

        def command(name, help_text):
            sub = commands.add_parser(name, help=help_text, description=help_text)
            sub.error = partial(_usage_error, sub.prog)
            return sub

        remember = command("remember", "Store a memory, or add a revision to the one under --key.")
        remember.add_argument("content", help="the text to remember, or - to read it from stdin")
        remember.add_argument("--namespace", default=settings.MEMORY_DEFAULT_NAMESPACE,
                              help=f"default: {settings.MEMORY_DEFAULT_NAMESPACE}")
        remember.add_argument("--key", help="stable key; remembering under an existing key revises it")
        remember.add_argument("--title")
        remember.add_argument("--kind")
        remember.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="repeatable")
        remember.add_argument("--source")
        remember.add_argument("--ttl-days", type=int, help="expire after this many days (0: never)")
        remember.add_argument("--valid-from", help="YYYY-MM-DD or ISO 8601 with a timezone")
        remember.add_argument("--valid-to", help="end of validity, exclusive")
        remember.add_argument("--subject")
        remember.add_argument("--predicate")
        remember.add_argument("--object")

        get = command("get", "Show a memory as known at --as-of, for valid time --valid-at.")
        which = get.add_mutually_exclusive_group(required=True)
        which.add_argument("id", nargs="?", type=int)
        which.add_argument("--key", help="look the memory up by key in --namespace instead of by id")
        get.add_argument("--namespace", default=settings.MEMORY_DEFAULT_NAMESPACE,
                         help=f"with --key; default: {settings.MEMORY_DEFAULT_NAMESPACE}")
        get.add_argument("--as-of")
        get.add_argument("--valid-at")

        history = command("history", "List every revision of a memory known by --as-of, oldest first.")
        history.add_argument("id", type=int)
        history.add_argument("--as-of")

        forget = command("forget", "Hide a memory from now on; its history stays.")
        forget.add_argument("id", type=int)
        forget.add_argument("--reason")

        restore = command("restore", "Bring a forgotten memory back.")
        restore.add_argument("id", type=int)
        restore.add_argument("--reason")

        listing = command("list", "List memories newest first, one page at a time.")
        listing.add_argument("--namespace", help="default: every namespace")
        listing.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="repeatable; all must match")
        listing.add_argument("--kind")
        listing.add_argument("--state", help=f"one of {', '.join(LIST_STATES)} (default: active)")
        listing.add_argument("--limit", type=int)
        listing.add_argument("--cursor", help="next_cursor from the previous page")

        stats = command("stats", "Show totals, per-namespace counts, top tags and database facts.")
        stats.add_argument("--namespace", help="default: every namespace")

        recall = command("recall", "Search memories by meaning and keywords.")
        recall.add_argument("query")
        recall.add_argument("--namespace", action="append", help="repeatable; default: every namespace")
        recall.add_argument("--tag", action="append", dest="tags", metavar="TAG")
        recall.add_argument("--kind", action="append", dest="kinds", metavar="KIND")
        recall.add_argument("--limit", type=int)
        recall.add_argument("--match", help="auto, all or any")
        recall.add_argument("--mode")
        recall.add_argument("--as-of")
        recall.add_argument("--valid-at")
        recall.add_argument("--explain", action="store_true", default=None)

    def run_from_argv(self, argv):
        """Run from the shell: a domain or argument error prints as JSON on stderr and exits with status 2."""
        try:
            super().run_from_argv(argv)
        except MemoryServiceError as error:
            self._fail({**error.as_dict(), "field": error.field})
        except OperationalError as error:
            if "no such table" not in str(error):
                raise
            self._fail({"code": "not_migrated", "field": None,
                        "message": "The database has no tables yet. Run 'python manage.py migrate' (or 'make run') first."})

    def _fail(self, error: dict):
        self.stderr.write(json.dumps({"error": error}, ensure_ascii=False))
        sys.exit(2)

    def handle(self, *args, command, **options):
        answer = getattr(self, f"_{command}")(options)
        self.stdout.write(json.dumps(answer, indent=2, ensure_ascii=False))

    def _remember(self, options):
        content = options["content"]
        if content == "-":
            content = options.get("stdin", sys.stdin).read()
        return services.memory_remember(
            namespace=options["namespace"], content=content, actor=cli_actor(), interface="cli",
            **_given(key=options["key"], title=options["title"], kind=options["kind"], tags=options["tags"],
                     source=options["source"], ttl_days=options["ttl_days"], valid_from=options["valid_from"],
                     valid_to=options["valid_to"], subject=options["subject"], predicate=options["predicate"],
                     object=options["object"]),
        ).as_dict()

    def _get(self, options):
        by_key = options["key"] is not None
        return selectors.memory_get(
            memory_id=options["id"], namespace=options["namespace"] if by_key else None, key=options["key"],
            as_of=options["as_of"], valid_at=options["valid_at"],
        ).as_dict()

    def _history(self, options):
        revisions = selectors.memory_history(memory_id=options["id"], as_of=options["as_of"])
        return {"id": options["id"], "revisions": [revision.as_dict() for revision in revisions]}

    def _forget(self, options):
        return services.memory_forget(memory_id=options["id"], reason=options["reason"], actor=cli_actor(),
                                      interface="cli").as_dict()

    def _restore(self, options):
        return services.memory_restore(memory_id=options["id"], reason=options["reason"], actor=cli_actor(),
                                       interface="cli").as_dict()

    def _list(self, options):
        return selectors.memory_list(
            **_given(namespace=options["namespace"], tags=options["tags"], kind=options["kind"],
                     state=options["state"], limit=options["limit"], cursor=options["cursor"]),
        ).as_dict()

    def _stats(self, options):
        return selectors.memory_stats(namespace=options["namespace"])

    def _recall(self, options):
        return selectors.memory_recall(query=options["query"], **_given(
            namespace=options["namespace"], tags=options["tags"], kinds=options["kinds"], limit=options["limit"],
            match=options["match"], mode=options["mode"], as_of=options["as_of"], valid_at=options["valid_at"],
            explain=options["explain"],
        )).as_dict()
