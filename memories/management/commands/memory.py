"""The ``memory`` command: remember, read, change and search memories from the shell, answering in JSON.

Each subcommand declares its options from its operation's arguments (``memories.arguments``),
reads the values given through that model, as REST does, then makes one service or
selector call.
"""

import json
import re
import sys
from functools import partial

from django.conf import settings

from memories import selectors, services
from memories.arguments import (
    Arguments,
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
    RestoreArgs,
    RouteArgs,
    StateChangeArgs,
    StatsArgs,
    validated,
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


def _option(parser, arguments, name: str, **kwargs) -> None:
    """Add ``--name`` (dashes for underscores), its help the argument's declared description."""
    parser.add_argument(f"--{name.replace('_', '-')}", help=_help(arguments, name), **kwargs)


def _repeatable(parser, arguments, name: str) -> None:
    """Add a list argument as an option given once per item: ``--tag A --tag B`` for ``tags``."""
    item = name.removesuffix("s")
    parser.add_argument(
        f"--{item}", action="append", dest=name, metavar=item.upper(), help=_help(arguments, name, "Repeatable.")
    )


def _default_namespace(parser, more: str = "") -> None:
    """Add ``--namespace`` for a command that writes or reads one namespace, the configured default unless given."""
    default = settings.MEMORY_DEFAULT_NAMESPACE
    parser.add_argument("--namespace", default=default, help=f"{more}default: {default}")


def _namespaces(parser) -> None:
    """Add ``--namespace`` for a read across namespaces: repeatable, every namespace unless given."""
    parser.add_argument("--namespace", action="append", help="Repeatable; default: every namespace.")


def _remember_options(parser) -> None:
    parser.add_argument("content", help="the text to remember, or - to read it from stdin")
    _default_namespace(parser)
    for name in ("key", "title", "kind"):
        _option(parser, RememberArgs, name)
    _repeatable(parser, RememberArgs, "tags")
    _option(parser, RememberArgs, "source")
    _option(parser, RememberArgs, "ttl_days", type=int)
    for name in ("valid_from", "valid_to", "subject", "predicate", "object"):
        _option(parser, RememberArgs, name)
    _option(parser, RememberArgs, "force", action="store_true")
    _option(parser, RememberArgs, "confidence", type=float)


def _learn_options(parser) -> None:
    parser.add_argument(
        "text", nargs="?", default="-", help="the text to learn from, or - (the default) to read it from stdin"
    )
    _default_namespace(parser)
    _option(parser, LearnArgs, "source")
    _repeatable(parser, LearnArgs, "tags")


def _get_options(parser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("id", nargs="?", type=int, help=_help(GetArgs, "id"))
    _option(which, GetArgs, "key")
    _default_namespace(parser, "with --key; ")
    _option(parser, GetArgs, "as_of")
    _option(parser, GetArgs, "valid_at")


def _history_options(parser) -> None:
    parser.add_argument("id", type=int, help=_help(HistoryArgs, "id"))
    _option(parser, HistoryArgs, "as_of")


def _change_options(arguments, parser) -> None:
    """The options of a change to one memory's state (forget, restore, promote, archive, unarchive)."""
    parser.add_argument("id", type=int, help=_help(arguments, "id"))
    _option(parser, arguments, "reason")


def _list_options(parser) -> None:
    parser.add_argument("--namespace", help="default: every namespace")
    _repeatable(parser, ListArgs, "tags")
    _option(parser, ListArgs, "kind")
    _option(parser, ListArgs, "state")
    _option(parser, ListArgs, "limit", type=int)
    for name in ("cursor", "as_of", "valid_at"):
        _option(parser, ListArgs, name)


def _stats_options(parser) -> None:
    parser.add_argument("--namespace", help="default: every namespace")


def _recall_options(parser) -> None:
    parser.add_argument("query", help=_help(RecallArgs, "query"))
    _namespaces(parser)
    _repeatable(parser, RecallArgs, "tags")
    _repeatable(parser, RecallArgs, "kinds")
    _option(parser, RecallArgs, "limit", type=int)
    for name in ("match", "mode", "as_of", "valid_at"):
        _option(parser, RecallArgs, name)
    _option(parser, RecallArgs, "explain", action="store_true")
    _option(parser, RecallArgs, "min_score", type=float)
    _option(parser, RecallArgs, "min_confidence", type=float)
    _repeatable(parser, RecallArgs, "states")


def _conflicts_options(parser) -> None:
    _namespaces(parser)
    _option(parser, ConflictsArgs, "as_of")
    _option(parser, ConflictsArgs, "valid_at")
    _option(parser, ConflictsArgs, "limit", type=int)


def _resolve_options(parser) -> None:
    parser.add_argument("id", help=_help(ResolveConflictArgs, "id"))
    _option(parser, ResolveConflictArgs, "resolution", required=True)
    for name in ("keep", "earlier"):
        _option(parser, ResolveConflictArgs, name, type=int)
    for name in ("boundary", "content", "reason"):
        _option(parser, ResolveConflictArgs, name)


def _graph_options(parser) -> None:
    _default_namespace(parser)
    for name in ("entity", "source", "target", "query", "as_of", "valid_at"):
        _option(parser, GraphArgs, name)
    _option(parser, GraphArgs, "limit", type=int)


def _route_options(parser) -> None:
    parser.add_argument("question", help=_help(RouteArgs, "question"))
    _namespaces(parser)
    _option(parser, RouteArgs, "limit", type=int)


# Each subcommand: its name, what it does (its help), and what adds its options.
SUBCOMMANDS = (
    ("remember", "Store a memory, or add a revision to the one under --key.", _remember_options),
    ("learn", "Store the facts, decisions and skills a text states, one memory each.", _learn_options),
    ("get", "Show a memory as known at --as-of, for valid time --valid-at.", _get_options),
    ("history", "List every revision of a memory known by --as-of, oldest first.", _history_options),
    ("forget", "Hide a memory from now on; its history stays.", partial(_change_options, ForgetArgs)),
    ("restore", "Bring a forgotten memory back.", partial(_change_options, RestoreArgs)),
    ("promote", "Make a candidate memory active from now on.", partial(_change_options, StateChangeArgs)),
    (
        "archive",
        "Archive a memory from now on: recall leaves it out unless asked.",
        partial(_change_options, StateChangeArgs),
    ),
    (
        "unarchive",
        "Bring an archived memory back to the state it had before.",
        partial(_change_options, StateChangeArgs),
    ),
    ("list", "List memories newest first, one page at a time.", _list_options),
    ("stats", "Show totals, per-namespace counts, top tags and database facts.", _stats_options),
    ("recall", "Search memories by meaning and keywords.", _recall_options),
    ("conflicts", "List facts that contradict each other, with where each came from.", _conflicts_options),
    ("resolve", "Resolve a conflict: keep one memory, split them in time, or merge them.", _resolve_options),
    (
        "graph",
        "Ask the facts of a namespace: an entity's relations (--entity), the paths between "
        "two (--source, --target), or the entities a text names (--query).",
        _graph_options,
    ),
    ("route", "Answer a question by the path the routing rules choose, with the route and why.", _route_options),
)


def _arguments(arguments: type[Arguments], options: dict) -> Arguments:
    """The options ``arguments`` declares, checked by the model REST and MCP read; one left unset takes its default."""
    given = {name: options[name] for name in arguments.model_fields if options.get(name) is not None}
    return validated(arguments, given, strict=False)


def _text(options: dict, name: str) -> str:
    """The text argument ``name``, read from stdin when it is ``-``."""
    text = options[name]
    return options.get("stdin", sys.stdin).read() if text == "-" else text


def _credit() -> dict:
    """Who writes: the shell's user, through the CLI."""
    return {"actor": cli_actor(), "interface": "cli"}


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
        for name, help_text, add_options in SUBCOMMANDS:
            command = commands.add_parser(name, help=help_text, description=help_text)
            command.error = partial(_usage_error, command.prog)
            add_options(command)

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
        args = _arguments(RememberArgs, {**options, "content": _text(options, "content")})
        return services.memory_remember(**args.model_dump(), **_credit()).as_dict()

    def _learn(self, options):
        args = _arguments(LearnArgs, {**options, "text": _text(options, "text")})
        return services.memory_learn(**args.model_dump(), **_credit()).as_dict()

    def _get(self, options):
        args = _arguments(GetArgs, options)
        return selectors.memory_get(
            memory_id=args.id,
            namespace=args.namespace if args.key is not None else None,
            key=args.key,
            as_of=args.as_of,
            valid_at=args.valid_at,
        ).as_dict()

    def _history(self, options):
        args = _arguments(HistoryArgs, options)
        revisions = selectors.memory_history(memory_id=args.id, as_of=args.as_of)
        attributes = selectors.attribute_history(memory_id=args.id, as_of=args.as_of)
        return History(memory_id=args.id, revisions=revisions, attributes=attributes).as_dict()

    def _forget(self, options):
        args = _arguments(ForgetArgs, options)
        return services.memory_forget(memory_id=args.id, reason=args.reason, **_credit()).as_dict()

    def _restore(self, options):
        args = _arguments(RestoreArgs, options)
        return services.memory_restore(memory_id=args.id, reason=args.reason, **_credit()).as_dict()

    def _promote(self, options):
        args = _arguments(StateChangeArgs, options)
        return services.memory_promote(memory_id=args.id, reason=args.reason, **_credit()).as_dict()

    def _archive(self, options):
        args = _arguments(StateChangeArgs, options)
        return services.memory_archive(memory_id=args.id, reason=args.reason, **_credit()).as_dict()

    def _unarchive(self, options):
        args = _arguments(StateChangeArgs, options)
        return services.memory_unarchive(memory_id=args.id, reason=args.reason, **_credit()).as_dict()

    def _list(self, options):
        return selectors.memory_list(**_arguments(ListArgs, options).model_dump()).as_dict()

    def _stats(self, options):
        return selectors.memory_stats(namespace=_arguments(StatsArgs, options).namespace)

    def _recall(self, options):
        return selectors.memory_recall(**_arguments(RecallArgs, options).model_dump()).as_dict()

    def _conflicts(self, options):
        return memory_conflicts(**_arguments(ConflictsArgs, options).model_dump()).as_dict()

    def _resolve(self, options):
        fields = _arguments(ResolveConflictArgs, options).model_dump()
        return services.conflict_resolve(conflict_id=fields.pop("id"), **fields, **_credit()).as_dict()

    def _graph(self, options):
        return selectors.memory_graph(**_arguments(GraphArgs, options).model_dump()).as_dict()

    def _route(self, options):
        return memory_route(**_arguments(RouteArgs, options).model_dump()).as_dict()
