"""learn-dev: what ``memory_learn`` stores from short texts, scored against gold facts; and what a learn call costs.

    .venv/bin/python benchmarks/learn.py ../shared/bench-data/learn-dev/learn_dev.json \
        [--output benchmarks/results/learn.json] [--embedder minilm] [--runs 20]

Quality. Each case of the data set is learned (``memory_learn``) into a namespace of its
own in a fresh temporary SQLite store and scored by the rule in the file's ``about``.
What was stored is read back from the store, never from the learn answer: the triples
are those of the namespace's memories visible now (``memory_list``), and every time
check asks the knowledge graph (``memory_graph``). A stored triple matches a gold
[subject, object, [predicate words]] when its two names match the pair in either
direction and its predicate contains one of the words. Names match after
``entity_name``, with the words "our" and "my" dropped, when equal or when one holds
the other as a whole run of words. Totals: triple recall and precision, changes applied
(the ended fact gone now, still shown between the two calls), validity checks at stated
dates, decisions and skills found, quiet texts (nothing stored from a text that states
nothing lasting) and names stored whole.

Speed. ``--runs`` times, a recap of about 2,000 characters (about 50 short fact
sentences, made-up names drawn from a fixed seed, none ever repeated, so neither a
namespace's dedup nor the embedding cache can help) is learned in process through the
service, another over REST in process (DRF's ``APIClient``, ``POST /api/v1/learn/``),
each into a fresh namespace. The floor, in the same runs: embedding the REST call's
stored items' contents in one batch with the project's embedder, which any learn that
stores them must do.
"""

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import sys
import time

import harness
from store import RESULTS, ROOT, open_store, save

# Words the about says to ignore in a name (articles go with knowledge.names.entity_name).
IGNORED_NAME_WORDS = {"our", "my"}
ARTICLES = ("the", "a", "an")
# More relations than any case's namespace holds.
GRAPH_LIMIT = 200
# So the instants before and after the between time differ.
PAUSE_SECONDS = 0.005
SEED = 20261207
RECAP_CHARS = 2000


# Names and triples ----------------------------------------------------------------------------------------------


def name_words(name: str) -> list[str]:
    """The words a name is compared by: normal form, no leading article, no 'our'/'my' (unless that is all of it)."""
    from knowledge.names import entity_name

    words = entity_name(name).split()
    if len(words) > 1 and words[0] in ARTICLES:
        words = words[1:]
    kept = [word for word in words if word not in IGNORED_NAME_WORDS]
    return kept or words


def _holds(longer: list[str], shorter: list[str]) -> bool:
    """Whether ``shorter`` is a run of whole words inside ``longer``."""
    size = len(shorter)
    return size > 0 and any(longer[start : start + size] == shorter for start in range(len(longer) - size + 1))


def names_match(stored: str, gold: str) -> bool:
    one, other = name_words(stored), name_words(gold)
    return one == other or _holds(one, other) or _holds(other, one)


def predicate_matches(predicate: str, words: list[str]) -> bool:
    from knowledge.names import predicate_name

    # predicate_name: lower case, and "owned_by" or "owned-by" read as "owned by".
    predicate = predicate_name(predicate or "")
    return any(word.lower() in predicate for word in words)


def triple_matches(stored: dict, gold: list) -> bool:
    """Whether a stored triple states the gold [subject, object, [words]], its names either way round."""
    subject, object_, words = gold
    forward = names_match(stored["subject"], subject) and names_match(stored["object"], object_)
    backward = names_match(stored["subject"], object_) and names_match(stored["object"], subject)
    return (forward or backward) and predicate_matches(stored["predicate"], words)


# Reading the store ----------------------------------------------------------------------------------------------


def visible_items(namespace: str) -> list[dict]:
    """Every memory of ``namespace`` visible now: kind, triple, content and revision."""
    from memories.selectors import LIST_LIMIT_MAX, memory_list

    items, cursor = [], None
    while True:
        page = memory_list(namespace=namespace, limit=LIST_LIMIT_MAX, cursor=cursor)
        items.extend(
            {
                "kind": record.kind,
                "subject": record.subject or "",
                "predicate": record.predicate or "",
                "object": record.object or "",
                "content": record.content,
                "revision_id": record.revision_id,
            }
            for record in page.items
        )
        cursor = page.next_cursor
        if cursor is None:
            return items


def graph_shows(namespace: str, names: set[str], fact: list, *, as_of: dt.datetime, valid_at: dt.datetime) -> bool:
    """Whether the graph of any of ``names`` (the fact's subject as stored) shows the fact at (as_of, valid_at)."""
    from memories.selectors import memory_graph

    _, object_, words = fact[:3]
    for name in sorted(names):
        result = memory_graph(namespace=namespace, entity=name, as_of=as_of, valid_at=valid_at, limit=GRAPH_LIMIT)
        for relation in result.entities[0].relations:
            if names_match(relation.other.name, object_) and predicate_matches(relation.predicate, words):
                return True
    return False


def subject_names(fact: list, answers: list) -> set[str]:
    """The names to ask the graph about: the fact's subject, and every stored name that matches it.

    The graph looks names up exactly (in normal form); "our wiki" or "the ledger service"
    match "wiki" or "ledger" by the about's rule, so they are asked about too.
    """
    names = {fact[0]}
    for answer in answers:
        for item in [*answer.stored, *answer.deduplicated]:
            names.update(name for name in (item.subject, item.object) if name and names_match(name, fact[0]))
    return names


# Scoring one case -----------------------------------------------------------------------------------------------


def learned(text: str, namespace: str):
    from memories.services import memory_learn

    return memory_learn(text=text, namespace=namespace, actor="benchmark", interface="cli")


def _skipped(answer, call: str) -> list[dict]:
    return [{"call": call, "text": entry.text, "reason": entry.reason} for entry in answer.skipped]


def score_case(case: dict) -> dict:
    """Learn one case in its own namespace and record what the store holds and which checks pass."""
    from memoryproject import dialect

    namespace = f"learn-{case['id']}".lower()
    record = {"id": case["id"]}
    if "before" in case:
        before = learned(case["before"], namespace)
        time.sleep(PAUSE_SECONDS)
        # The clock the writes are stamped by (the database's on PostgreSQL).
        between = dialect.now()
        time.sleep(PAUSE_SECONDS)
        after = learned(case["after"], namespace)
        answers, gold = [before, after], case.get("triples_after", [])
        # What 'before' stored is set-up: scored by the change check, not as a triple.
        set_up = {item.revision_id for item in before.stored}
        record["skipped"] = _skipped(before, "before") + _skipped(after, "after")
    else:
        answers, gold, set_up = [learned(case["text"], namespace)], case.get("triples", []), set()
        record["skipped"] = _skipped(answers[0], "text")
    now = dialect.now()
    visible = visible_items(namespace)
    record["stored"] = [
        {key: item[key] for key in ("kind", "subject", "predicate", "object", "content")}
        | {"set_up": item["revision_id"] in set_up}
        for item in visible
    ]
    triples = [item for item in visible if item["subject"] and item["revision_id"] not in set_up]

    record["triples_stored"] = len(triples)
    record["triples_stored_matched"] = sum(any(triple_matches(item, fact) for fact in gold) for item in triples)
    found = [any(triple_matches(item, fact) for item in triples) for fact in gold]
    if case.get("any_of"):
        record["gold_triples"], record["gold_matched"] = 1, int(any(found))
    else:
        record["gold_triples"], record["gold_matched"] = len(gold), sum(found)
    missed = [fact for fact, hit in zip(gold, found) if not hit]
    record["gold_missed"] = [] if case.get("any_of") and any(found) else missed

    if "ends" in case:
        names = subject_names(case["ends"], answers)
        gone = not graph_shows(namespace, names, case["ends"], as_of=now, valid_at=now)
        shown_between = graph_shows(namespace, names, case["ends"], as_of=between, valid_at=between)
        record["change"] = {"gone_now": gone, "shown_between": shown_between, "applied": gone and shown_between}
    if "valid" in case:
        record["valid"] = []
        for check in case["valid"]:
            at = dt.datetime.fromisoformat(check[3].replace("Z", "+00:00"))
            shown = graph_shows(namespace, subject_names(check, answers), check, as_of=now, valid_at=at)
            record["valid"].append({"check": check, "shown": shown, "passed": shown == check[4]})
    for kind in ("decision", "skill"):
        if kind in case:
            record[kind] = any(
                item["kind"] == kind and case[kind].casefold() in item["content"].casefold() for item in visible
            )
    if case.get("none"):
        record["quiet"] = not visible
    if "entity_exact" in case:
        stored_names = {" ".join(name_words(item[part])) for item in triples for part in ("subject", "object")}
        record["entity_exact"] = {name: " ".join(name_words(name)) in stored_names for name in case["entity_exact"]}
    record["passed"] = _all_passed(record)
    return record


def _all_passed(record: dict) -> bool:
    return (
        record["gold_matched"] == record["gold_triples"]
        and record["triples_stored_matched"] == record["triples_stored"]
        and record.get("change", {}).get("applied", True)
        and all(check["passed"] for check in record.get("valid", []))
        and record.get("decision", True)
        and record.get("skill", True)
        and record.get("quiet", True)
        and all(record.get("entity_exact", {}).values())
    )


def totals(records: list[dict]) -> dict:
    def count(key: str) -> dict:
        marks = [record[key] for record in records if key in record]
        return {"passed": sum(marks), "n": len(marks)}

    gold = sum(record["gold_triples"] for record in records)
    stored = sum(record["triples_stored"] for record in records)
    changes = [record["change"]["applied"] for record in records if "change" in record]
    valid = [check["passed"] for record in records for check in record.get("valid", [])]
    exact = [hit for record in records for hit in record.get("entity_exact", {}).values()]
    return {
        "triple_recall": {"matched": sum(record["gold_matched"] for record in records), "gold": gold},
        "triple_precision": {"matched": sum(record["triples_stored_matched"] for record in records), "stored": stored},
        "changes_applied": {"passed": sum(changes), "n": len(changes)},
        "valid_checks": {"passed": sum(valid), "n": len(valid)},
        "decisions_found": count("decision"),
        "skills_found": count("skill"),
        "quiet_texts": count("quiet"),
        "entity_exact": {"passed": sum(exact), "n": len(exact)},
        "triples_on_other_kinds": sum(
            1
            for record in records
            for item in record["stored"]
            if item["subject"] and item["kind"] != "fact" and not item["set_up"]
        ),
        "cases_passed": {"passed": sum(record["passed"] for record in records), "n": len(records)},
    }


def print_quality(summary: dict, records: list[dict], cases: dict) -> None:
    for label, key, out_of in (
        ("triple recall", "triple_recall", "gold"),
        ("triple precision", "triple_precision", "stored"),
    ):
        matched, n = summary[key]["matched"], summary[key][out_of]
        print(f"{label:18} {matched}/{n}  " + (f"{matched / n:.2f}" if n else "(none)"))
    for key in (
        "changes_applied",
        "valid_checks",
        "decisions_found",
        "skills_found",
        "quiet_texts",
        "entity_exact",
        "cases_passed",
    ):
        print(f"{key.replace('_', ' '):18} {summary[key]['passed']}/{summary[key]['n']}")
    if summary["triples_on_other_kinds"]:
        print(f"(of the stored triples, {summary['triples_on_other_kinds']} are on decisions or skills)")
    failing = [record for record in records if not record["passed"]]
    if failing:
        print(f"\nfailing cases ({len(failing)}):")
    for record in failing:
        case = cases[record["id"]]
        text = case.get("text") or f"{case['before']} => {case['after']}"
        print(f"- {record['id']}: {text!r}")
        if record["gold_missed"]:
            print(f"    missed: {record['gold_missed']}")
        for name in ("change", "decision", "skill", "quiet", "entity_exact"):
            if name in record:
                print(f"    {name}: {record[name]}")
        for check in record.get("valid", []):
            if not check["passed"]:
                print(f"    valid failed: {check['check']} (shown: {check['shown']})")
        for item in record["stored"]:
            triple = f" ({item['subject']} | {item['predicate']} | {item['object']})" if item["subject"] else ""
            print(f"    stored {item['kind']}{triple}{' [before]' if item['set_up'] else ''}: {item['content']!r}")
        if not record["stored"]:
            print("    stored nothing")
        for entry in record["skipped"]:
            print(f"    skipped ({entry['call']}) {entry['text']!r}: {entry['reason']}")


# Speed ----------------------------------------------------------------------------------------------------------

SYLLABLES = (
    "zen",
    "kor",
    "vel",
    "tam",
    "bri",
    "sol",
    "nor",
    "qua",
    "lum",
    "dax",
    "pel",
    "rho",
    "fen",
    "gil",
    "jor",
    "mav",
    "ost",
    "ria",
    "ulm",
    "yar",
)
ROLES = (
    "ledger",
    "gateway",
    "router",
    "mailer",
    "scheduler",
    "indexer",
    "exporter",
    "tracker",
    "notifier",
    "uploader",
    "resolver",
    "archiver",
    "crawler",
    "billing service",
    "search service",
    "auth service",
)
TECHS = (
    "Kafka",
    "Redis",
    "Postgres",
    "RabbitMQ",
    "Elasticsearch",
    "Celery",
    "gRPC",
    "Nginx",
    "Envoy",
    "Vault",
    "Consul",
    "ClickHouse",
    "MongoDB",
    "Memcached",
    "Airflow",
    "Spark",
)
CLOUDS = ("AWS", "GCP", "Azure", "Hetzner", "Fly.io", "Render", "DigitalOcean", "OVH")
# Simple facts as a recap lists them; the rules being tuned should take each as one item.
TEMPLATES = (
    "The {service} uses {tech}.",
    "The {service} runs on {host}.",
    "{person} leads the {team} team.",
    "The {service} depends on the {other}.",
    "The {service} is hosted on {cloud}.",
    "{person} maintains the {service}.",
)


def _made_up(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(syllables))


def recap_text(rng: random.Random, seen: set[str]) -> tuple[str, int]:
    """A recap of RECAP_CHARS or so of fact sentences never written before; and how many sentences it holds."""
    sentences = []
    while sum(len(sentence) + 1 for sentence in sentences) < RECAP_CHARS:
        sentence = rng.choice(TEMPLATES).format(
            service=f"{_made_up(rng, 2)} {rng.choice(ROLES)}",
            other=f"{_made_up(rng, 2)} {rng.choice(ROLES)}",
            tech=rng.choice(TECHS),
            host=f"{_made_up(rng, 1)}-{rng.randint(1, 999)}",
            person=_made_up(rng, 2).capitalize() + "a",
            team=_made_up(rng, 2),
            cloud=rng.choice(CLOUDS),
        )
        # A sentence seen before could find its vector in the embedding cache.
        if sentence not in seen:
            seen.add(sentence)
            sentences.append(sentence)
    lines = [" ".join(sentences[start : start + 5]) for start in range(0, len(sentences), 5)]
    return "Sync recap:\n" + "\n".join(lines), len(sentences)


def rest_client():
    from rest_framework.test import APIClient

    from memories.services.keys import api_key_create

    _, token = api_key_create(name="learn benchmark", scopes=["read", "write"], actor="benchmark", interface="cli")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def learned_over_rest(client, text: str, namespace: str) -> dict:
    response = client.post("/api/v1/learn/", {"text": text, "namespace": namespace}, format="json")
    if response.status_code != 200:
        raise SystemExit(f"POST /api/v1/learn/ answered {response.status_code}: {response.content[:500]!r}")
    return response.json()


def speed(runs: int) -> dict:
    """Time ``runs`` learn calls through the service and over REST, and the floor beside them, alternated."""
    from search.embeddings import get_embedder

    rng, seen = random.Random(SEED), set()
    client, embedder = rest_client(), get_embedder()
    # Untimed: loads the model and warms the code paths.
    warm_text, _ = recap_text(rng, seen)
    learned(warm_text, "speed-warm-up")
    embedder.embed(
        [
            item["content"]
            for item in learned_over_rest(client, recap_text(rng, seen)[0], "speed-warm-up-rest")["stored"]
        ]
    )
    service, rest, floor, stored, lengths, sentences = [], [], [], [], [], []
    for run in range(runs):
        text, count = recap_text(rng, seen)
        answer, seconds = harness.timed(learned, text, f"speed-service-{run}")
        service.append(seconds)
        stored.append(len(answer.stored))
        lengths.append(len(text))
        sentences.append(count)

        text, count = recap_text(rng, seen)
        answer, seconds = harness.timed(learned_over_rest, client, text, f"speed-rest-{run}")
        rest.append(seconds)
        stored.append(len(answer["stored"]))
        lengths.append(len(text))
        sentences.append(count)

        contents = [item["content"] for item in answer["stored"]]
        _, seconds = harness.timed(embedder.embed, contents)
        floor.append(seconds)
    result = {
        "runs": runs,
        "learn_service": harness.summary_ms(service),
        "learn_rest": harness.summary_ms(rest),
        "floor_embed_stored_items": harness.summary_ms(floor),
        "text_chars": {"min": min(lengths), "max": max(lengths)},
        "sentences_per_text": {"min": min(sentences), "max": max(sentences)},
        "items_stored_per_call": {"min": min(stored), "max": max(stored), "mean": round(sum(stored) / len(stored), 1)},
        "embedder": embedder.name,
    }
    floor_p95 = result["floor_embed_stored_items"]["p95_ms"]
    result["rest_p95_over_floor_p95"] = round(result["learn_rest"]["p95_ms"] / floor_p95, 2) if floor_p95 else None
    return result


def print_speed(result: dict) -> None:
    print(
        f"\nspeed, {result['runs']} runs, texts of {result['text_chars']['min']}-{result['text_chars']['max']} "
        f"characters, {result['sentences_per_text']['min']}-{result['sentences_per_text']['max']} sentences, "
        f"items stored per call {result['items_stored_per_call']}"
    )
    for key in ("learn_service", "learn_rest", "floor_embed_stored_items"):
        print(f"{key:26} p50 {result[key]['p50_ms']:9.1f} ms  p95 {result[key]['p95_ms']:9.1f} ms")
    print(f"{'p95 learn REST / floor':26} {result['rest_p95_over_floor_p95']}")


# Main -----------------------------------------------------------------------------------------------------------


def learn_code_changed() -> bool | None:
    """Whether the learn rules in the working tree differ from the commit recorded (they are often being tuned)."""
    try:
        return bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--", "knowledge", "memories/services/learn.py"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            ).stdout.strip()
        )
    except OSError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="path to learn_dev.json")
    parser.add_argument("--output", default=str(RESULTS / "learn.json"))
    parser.add_argument("--embedder", default="minilm", help="minilm (default) or hash")
    parser.add_argument("--runs", type=int, default=20, help="timed learn calls of each kind (default 20)")
    args = parser.parse_args()
    with open(args.data, encoding="utf-8") as handle:
        data = json.load(handle)
    # Read before the rules are imported: they are the ones measured.
    changed = learn_code_changed()
    # REST writes are throttled per key by default; the timed runs would hit the limit. Request logs are noise here.
    os.environ.setdefault("MEMORY_API_WRITES_PER_MINUTE", "0")
    os.environ.setdefault("MEMORY_LOG_LEVEL", "ERROR")
    open_store(db_path=None, embedder=args.embedder)

    records = [score_case(case) for case in data["cases"]]
    summary = totals(records)
    print_quality(summary, records, {case["id"]: case for case in data["cases"]})
    timing = speed(args.runs) if args.runs > 0 else None
    if timing:
        print_speed(timing)
    save(
        {
            "benchmark": "learn",
            "command": " ".join(sys.argv),
            "data": args.data,
            "environment": harness.environment() | {"learn_code_changed": changed},
            "quality": summary,
            "speed": timing,
            "cases": records,
        },
        args.output,
    )


if __name__ == "__main__":
    main()
