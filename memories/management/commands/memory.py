import json
import re
import sys
from functools import partial

from django.conf import settings

from memories import selectors, services
from memories.arguments import (
    ConflictsArgs,
    ForgetArgs,
    GetArgs,
    GraphArgs,
    HistoryArgs,
    LearnArgs,
    ListArgs,
    RecallArgs,
    RememberArgs,
    ResolveConflictArgs,
    RouteArgs,
    StateChangeArgs,
)
from memories.management.cli import ProjectCommand, cli_actor
from memories.records.revision_history import History
from memories.selectors.conflicts import memory_conflicts
from memories.selectors.routing import memory_route
from memoryproject.exceptions import InvalidInput, MemoryServiceError

# "argument --ttl-days: invalid int value: 'x'" names the option; it becomes the field.
_ARGUMENT = re.compile(r"argument (?:\S+/)?-*([\w-]+):")
_REQUIRED = re.compile(r"the following arguments are required: -*([\w-]+)")


def _usage_error(prog: str, message: str):
    """Raise argparse's complaint as InvalidInput, so it prints as JSON like every other error."""
    match = _ARGUMENT.match(message) or _REQUIRED.match(message)
    field = match.group(1).replace("-", "_") if match else None
    raise InvalidInput(f"{message}. Run '{prog} --help' for usage.", field=field)


def _help(arguments, name: str, more: str = "") -> str:
    """The argument's declared description, if any, then ``more``, as argparse help (which reads % as formatting)."""
    return " ".join(part for part in (arguments.model_fields[name].description, more) if part).replace("%", "%%")


def _given(**values) -> dict:
    """Drop options left unset, so the service's own defaults apply."""
    return {name: value for name, value in values.items() if value is not None}


class Command(ProjectCommand):
    help = (
        "Remember, learn, read, forget, restore, promote and archive memories, list and resolve conflicts, "
        "and ask the knowledge graph, from the shell; answers are JSON."
    )
    # Configuration is checked by serve, doctor and check; here the checks would import every door's URLs.
    requires_system_checks = []

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
        remember.add_argument(
            "--namespace",
            default=settings.MEMORY_DEFAULT_NAMESPACE,
            help=f"default: {settings.MEMORY_DEFAULT_NAMESPACE}",
        )
        for name in ("key", "title", "kind"):
            remember.add_argument(f"--{name}", help=_help(RememberArgs, name))
        remember.add_argument(
            "--tag", action="append", dest="tags", metavar="TAG", help=_help(RememberArgs, "tags", "Repeatable.")
        )
        remember.add_argument("--source", help=_help(RememberArgs, "source"))
        remember.add_argument("--ttl-days", type=int, help=_help(RememberArgs, "ttl_days"))
        remember.add_argument("--valid-from", help=_help(RememberArgs, "valid_from"))
        remember.add_argument("--valid-to", help=_help(RememberArgs, "valid_to"))
        for name in ("subject", "predicate", "object"):
            remember.add_argument(f"--{name}", help=_help(RememberArgs, name))
        remember.add_argument("--force", action="store_true", help=_help(RememberArgs, "force"))
        remember.add_argument("--confidence", type=float, help=_help(RememberArgs, "confidence"))

        learn = command("learn", "Store the facts, decisions and skills a text states, one memory each.")
        learn.add_argument(
            "text", nargs="?", default="-", help="the text to learn from, or - (the default) to read it from stdin"
        )
        learn.add_argument(
            "--namespace",
            default=settings.MEMORY_DEFAULT_NAMESPACE,
            help=f"default: {settings.MEMORY_DEFAULT_NAMESPACE}",
        )
        learn.add_argument("--source", help=_help(LearnArgs, "source"))
        learn.add_argument(
            "--tag", action="append", dest="tags", metavar="TAG", help=_help(LearnArgs, "tags", "Repeatable.")
        )

        get = command("get", "Show a memory as known at --as-of, for valid time --valid-at.")
        which = get.add_mutually_exclusive_group(required=True)
        which.add_argument("id", nargs="?", type=int, help=_help(GetArgs, "id"))
        which.add_argument("--key", help=_help(GetArgs, "key"))
        get.add_argument(
            "--namespace",
            default=settings.MEMORY_DEFAULT_NAMESPACE,
            help=f"with --key; default: {settings.MEMORY_DEFAULT_NAMESPACE}",
        )
        get.add_argument("--as-of", help=_help(GetArgs, "as_of"))
        get.add_argument("--valid-at", help=_help(GetArgs, "valid_at"))

        history = command("history", "List every revision of a memory known by --as-of, oldest first.")
        history.add_argument("id", type=int, help=_help(HistoryArgs, "id"))
        history.add_argument("--as-of", help=_help(HistoryArgs, "as_of"))

        for name, help_text in (
            ("forget", "Hide a memory from now on; its history stays."),
            ("restore", "Bring a forgotten memory back."),
        ):
            change = command(name, help_text)
            change.add_argument("id", type=int, help=_help(ForgetArgs, "id"))
            change.add_argument("--reason", help=_help(ForgetArgs, "reason"))
        for name, help_text in (
            ("promote", "Make a candidate memory active from now on."),
            ("archive", "Archive a memory from now on: recall leaves it out unless asked."),
            ("unarchive", "Bring an archived memory back to the state it had before."),
        ):
            change = command(name, help_text)
            change.add_argument("id", type=int, help=_help(StateChangeArgs, "id"))
            change.add_argument("--reason", help=_help(StateChangeArgs, "reason"))

        listing = command("list", "List memories newest first, one page at a time.")
        listing.add_argument("--namespace", help="default: every namespace")
        listing.add_argument(
            "--tag", action="append", dest="tags", metavar="TAG", help=_help(ListArgs, "tags", "Repeatable.")
        )
        listing.add_argument("--kind", help=_help(ListArgs, "kind"))
        listing.add_argument("--state", help=_help(ListArgs, "state"))
        listing.add_argument("--limit", type=int, help=_help(ListArgs, "limit"))
        listing.add_argument("--cursor", help=_help(ListArgs, "cursor"))
        listing.add_argument("--as-of", help=_help(ListArgs, "as_of"))
        listing.add_argument("--valid-at", help=_help(ListArgs, "valid_at"))

        stats = command("stats", "Show totals, per-namespace counts, top tags and database facts.")
        stats.add_argument("--namespace", help="default: every namespace")

        recall = command("recall", "Search memories by meaning and keywords.")
        recall.add_argument("query", help=_help(RecallArgs, "query"))
        recall.add_argument("--namespace", action="append", help="Repeatable; default: every namespace.")
        recall.add_argument(
            "--tag", action="append", dest="tags", metavar="TAG", help=_help(RecallArgs, "tags", "Repeatable.")
        )
        recall.add_argument(
            "--kind", action="append", dest="kinds", metavar="KIND", help=_help(RecallArgs, "kinds", "Repeatable.")
        )
        recall.add_argument("--limit", type=int, help=_help(RecallArgs, "limit"))
        for name in ("match", "mode", "as_of", "valid_at"):
            recall.add_argument(f"--{name.replace('_', '-')}", help=_help(RecallArgs, name))
        recall.add_argument("--explain", action="store_true", default=None, help=_help(RecallArgs, "explain"))
        recall.add_argument("--min-score", type=float, help=_help(RecallArgs, "min_score"))
        recall.add_argument("--min-confidence", type=float, help=_help(RecallArgs, "min_confidence"))
        recall.add_argument(
            "--state", action="append", dest="states", metavar="STATE", help=_help(RecallArgs, "states", "Repeatable.")
        )

        conflicts = command("conflicts", "List facts that contradict each other, with where each came from.")
        conflicts.add_argument("--namespace", action="append", help="Repeatable; default: every namespace.")
        for name in ("as_of", "valid_at"):
            conflicts.add_argument(f"--{name.replace('_', '-')}", help=_help(ConflictsArgs, name))
        conflicts.add_argument("--limit", type=int, help=_help(ConflictsArgs, "limit"))

        resolve = command("resolve", "Resolve a conflict: keep one memory, split them in time, or merge them.")
        resolve.add_argument("id", help=_help(ResolveConflictArgs, "id"))
        resolve.add_argument("--resolution", required=True, help=_help(ResolveConflictArgs, "resolution"))
        for name in ("keep", "earlier"):
            resolve.add_argument(f"--{name}", type=int, help=_help(ResolveConflictArgs, name))
        for name in ("boundary", "content", "reason"):
            resolve.add_argument(f"--{name}", help=_help(ResolveConflictArgs, name))

        graph = command(
            "graph",
            "Ask the facts of a namespace: an entity's relations (--entity), the paths between "
            "two (--source, --target), or the entities a text names (--query).",
        )
        graph.add_argument(
            "--namespace",
            default=settings.MEMORY_DEFAULT_NAMESPACE,
            help=f"default: {settings.MEMORY_DEFAULT_NAMESPACE}",
        )
        for name in ("entity", "source", "target", "query", "as_of", "valid_at"):
            graph.add_argument(f"--{name.replace('_', '-')}", help=_help(GraphArgs, name))
        graph.add_argument("--limit", type=int, help=_help(GraphArgs, "limit"))

        route = command("route", "Answer a question by the path the routing rules choose, with the route and why.")
        route.add_argument("question", help=_help(RouteArgs, "question"))
        route.add_argument("--namespace", action="append", help="Repeatable; default: every namespace.")
        route.add_argument("--limit", type=int, help=_help(RouteArgs, "limit"))

    def run_from_argv(self, argv):
        """Run from the shell: a domain or argument error prints as JSON on stderr and exits with status 2."""
        try:
            super().run_from_argv(argv)
        except MemoryServiceError as error:
            self.stderr.write(json.dumps({"error": {**error.as_dict(), "field": error.field}}, ensure_ascii=False))
            sys.exit(2)

    def fail(self, error: MemoryServiceError):
        raise error  # for run_from_argv to print as JSON, with its code

    def handle(self, *args, command, **options):
        answer = getattr(self, f"_{command}")(options)
        self.stdout.write(json.dumps(answer, indent=2, ensure_ascii=False))

    def _remember(self, options):
        content = options["content"]
        if content == "-":
            content = options.get("stdin", sys.stdin).read()
        return services.memory_remember(
            namespace=options["namespace"],
            content=content,
            actor=cli_actor(),
            interface="cli",
            **_given(
                key=options["key"],
                title=options["title"],
                kind=options["kind"],
                tags=options["tags"],
                source=options["source"],
                ttl_days=options["ttl_days"],
                valid_from=options["valid_from"],
                valid_to=options["valid_to"],
                subject=options["subject"],
                predicate=options["predicate"],
                object=options["object"],
                confidence=options["confidence"],
            ),
            force=options["force"],
        ).as_dict()

    def _learn(self, options):
        text = options["text"]
        if text == "-":
            text = options.get("stdin", sys.stdin).read()
        return services.memory_learn(
            text=text,
            namespace=options["namespace"],
            source=options["source"],
            tags=options["tags"],
            actor=cli_actor(),
            interface="cli",
        ).as_dict()

    def _get(self, options):
        by_key = options["key"] is not None
        return selectors.memory_get(
            memory_id=options["id"],
            namespace=options["namespace"] if by_key else None,
            key=options["key"],
            as_of=options["as_of"],
            valid_at=options["valid_at"],
        ).as_dict()

    def _history(self, options):
        revisions = selectors.memory_history(memory_id=options["id"], as_of=options["as_of"])
        attributes = selectors.attribute_history(memory_id=options["id"], as_of=options["as_of"])
        return History(memory_id=options["id"], revisions=revisions, attributes=attributes).as_dict()

    def _forget(self, options):
        return services.memory_forget(
            memory_id=options["id"], reason=options["reason"], actor=cli_actor(), interface="cli"
        ).as_dict()

    def _restore(self, options):
        return services.memory_restore(
            memory_id=options["id"], reason=options["reason"], actor=cli_actor(), interface="cli"
        ).as_dict()

    def _promote(self, options):
        return services.memory_promote(
            memory_id=options["id"], reason=options["reason"], actor=cli_actor(), interface="cli"
        ).as_dict()

    def _archive(self, options):
        return services.memory_archive(
            memory_id=options["id"], reason=options["reason"], actor=cli_actor(), interface="cli"
        ).as_dict()

    def _unarchive(self, options):
        return services.memory_unarchive(
            memory_id=options["id"], reason=options["reason"], actor=cli_actor(), interface="cli"
        ).as_dict()

    def _list(self, options):
        return selectors.memory_list(
            **_given(
                namespace=options["namespace"],
                tags=options["tags"],
                kind=options["kind"],
                state=options["state"],
                limit=options["limit"],
                cursor=options["cursor"],
                as_of=options["as_of"],
                valid_at=options["valid_at"],
            ),
        ).as_dict()

    def _stats(self, options):
        return selectors.memory_stats(namespace=options["namespace"])

    def _recall(self, options):
        return selectors.memory_recall(
            query=options["query"],
            **_given(
                namespace=options["namespace"],
                tags=options["tags"],
                kinds=options["kinds"],
                limit=options["limit"],
                match=options["match"],
                mode=options["mode"],
                as_of=options["as_of"],
                valid_at=options["valid_at"],
                explain=options["explain"],
                min_score=options["min_score"],
                states=options["states"],
                min_confidence=options["min_confidence"],
            ),
        ).as_dict()

    def _conflicts(self, options):
        return memory_conflicts(
            **_given(
                namespace=options["namespace"],
                as_of=options["as_of"],
                valid_at=options["valid_at"],
                limit=options["limit"],
            )
        ).as_dict()

    def _resolve(self, options):
        return services.conflict_resolve(
            conflict_id=options["id"],
            resolution=options["resolution"],
            actor=cli_actor(),
            interface="cli",
            **_given(
                keep=options["keep"],
                boundary=options["boundary"],
                earlier=options["earlier"],
                content=options["content"],
                reason=options["reason"],
            ),
        ).as_dict()

    def _graph(self, options):
        return selectors.memory_graph(
            namespace=options["namespace"],
            **_given(
                entity=options["entity"],
                source=options["source"],
                target=options["target"],
                query=options["query"],
                limit=options["limit"],
                as_of=options["as_of"],
                valid_at=options["valid_at"],
            ),
        ).as_dict()

    def _route(self, options):
        return memory_route(
            question=options["question"], **_given(namespace=options["namespace"], limit=options["limit"])
        ).as_dict()
