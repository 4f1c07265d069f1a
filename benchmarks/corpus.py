"""Synthetic but natural-looking memories: what an agent would store about a team's work.

Text is built from sentence templates whose slots (people, projects, tools, places,
verbs, nouns, adjectives, reasons) are drawn from word lists with Zipfian weights, and
a share of free phrases from a long-tailed vocabulary (common words first, then
made-up product and code names), so term frequencies fall off as in real notes: a few
words are in most memories and most words are rare. Every text is 100-300 characters.

Deterministic for a seed: the same seed gives the same texts on every machine.
"""

import numpy as np

PEOPLE = """Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Mallory Niaj Olivia Peggy Rupert Sybil Trent
Victor Walter Yusuf Zara Priya Mateo Sofia Liam Noah Emma Ava Mia Lucas Amara Kenji Aiko Dmitri Olga Pierre
Chloe Hannah Jonas Lena Marco Giulia Ines Tomas Rosa Omar Layla Ravi Anika Chen Wei Hiro Yuki Sven Astrid
Kofi Amina Diego Camila Lars Freya Nadia Farid Tariq Selin Emre Maya Eli Noor Samir Leila""".split()

PROJECTS = """Apollo Borealis Cascade Dynamo Ember Falcon Granite Helix Ion Jupiter Kestrel Lumen Meridian Nimbus
Orion Pulsar Quasar Redwood Sequoia Tundra Umbra Vortex Willow Xenon Yarrow Zephyr Atlas Beacon Comet Drift
Echo Flux Glacier Harbor Iris Juniper Keystone Lattice Mosaic Nova Onyx Prism Quill Ripple Summit Tidal
Vertex Wavelength""".split()

TOOLS = """Kubernetes Postgres Redis Kafka Terraform Docker Grafana Prometheus Nginx Django React TypeScript
Python Rust Golang Elasticsearch SQLite Airflow Spark Snowflake BigQuery Jenkins GitHub GitLab Sentry Datadog
Vault Consul Ansible Helm Istio Envoy RabbitMQ Celery FastAPI Flask Svelte Vue Webpack Vite pytest Jest
Playwright Cypress Figma Jira Confluence Slack Notion Linear PagerDuty OpenTelemetry Jaeger MinIO Ceph ZFS
Tailscale WireGuard Cloudflare Fastly Vercel Netlify Heroku Fly.io DigitalOcean Hetzner AWS GCP Azure Lambda
DynamoDB Aurora Bigtable Spanner ClickHouse DuckDB Pandas NumPy PyTorch TensorFlow ONNX Triton vLLM""".split()

PLACES = """Berlin Lisbon Tokyo Toronto Nairobi Singapore Austin Denver Dublin Madrid Paris Oslo Seoul Sydney
Chicago Boston Seattle Zurich Vienna Prague Warsaw Istanbul Cairo Lagos Mumbai Bangalore Jakarta Manila
Santiago Lima Bogota Mexico Montreal Vancouver Amsterdam Copenhagen Helsinki Stockholm Barcelona Milan""".split()

TEAMS = """platform infra data mobile web payments search growth security design support billing identity
analytics reliability frontend backend ml research onboarding""".split()

VERBS = """migrate deploy refactor upgrade rewrite benchmark monitor document review test archive replace split
merge shard cache throttle rotate encrypt backfill reindex rollback pin patch audit profile tune retire
restart scale freeze version publish""".split()

PAST = """migrated deployed refactored upgraded rewrote benchmarked monitored documented reviewed tested
archived replaced split merged sharded cached throttled rotated encrypted backfilled reindexed rolled back
pinned patched audited profiled tuned retired restarted scaled froze versioned published""".split()

NOUNS = """database cluster service pipeline dashboard schema endpoint queue worker cron job backup replica
index certificate token secret config release branch build cache bucket tenant invoice report alert
incident runbook deadline budget roadmap meeting review contract vendor laptop keyboard monitor office
sprint milestone ticket bug feature flag experiment model dataset embedding prompt agent memory summary
newsletter invoice customer account password license domain firewall proxy gateway webhook scheduler
storage volume snapshot region zone node pod container image registry package dependency library
migration rollout canary latency throughput quota timeout retry lock transaction""".split()

ADJECTIVES = """slow fast flaky stable legacy new old critical minor urgent cheap expensive noisy quiet large
small secure broken healthy stale fresh internal external primary secondary weekly monthly nightly daily
manual automatic shared private public regional global experimental deprecated""".split()

REASONS = """the latency doubled under load
the vendor raised prices
the old version lost support
a customer reported data loss
the audit asked for it
the on-call rotation was overloaded
the tests kept timing out
nobody owned it anymore
the disk filled up twice
it saves money every month
the security review flagged it
the team wanted fewer moving parts
the migration window is short
the dashboard was misleading
it blocked the release
the nightly job kept failing""".split("\n")

COMMON = """time people year way day thing man world life hand part child eye woman place work week case point
government company number group problem fact plan team room issue side kind head house friend question
power money change program hour game line end member law car city name president idea body information
back parent face level door health art war history party result morning reason research girl guy moment
air teacher force education food story price version policy process order market sense interest field
value page music color truth chance window table paper goal step light stage trip field cost plan note
list call open close start finish ask want need like prefer remember forget agree decide choose keep
move share send check update fix note write read build ship store find learn teach test trust""".split()

# Syllables for made-up names: the long tail of a real team's vocabulary (products,
# code names, internal jargon) that appears in few memories each.
_ONSETS = [
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "z",
    "br",
    "cr",
    "dr",
    "fl",
    "gr",
    "kl",
    "pl",
    "pr",
    "sk",
    "sl",
    "st",
    "tr",
    "sh",
    "ch",
    "th",
]
_NUCLEI = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y"]
_CODAS = ["", "", "", "n", "r", "s", "l", "x", "m", "nd", "rk", "st", "th"]

TEMPLATES = [
    "{person} prefers {tool} over {tool2} for the {project} {noun}.",
    "Decision: the {team} team will {verb} the {adjective} {noun} before the {project} launch because {reason}.",
    "{person} said the {noun} in {project} was {past} after {reason}.",
    "Remember that {person} owns the {adjective} {noun} for {project} and reviews changes on {day}.",
    "The {project} {noun} runs on {tool} in {place}; {person} {past} it last {period}.",
    "Meeting note: {person} and {person2} agreed to {verb} the {noun} next {period}.",
    "{tool} {noun} for {project} is {adjective}; ask {person} before you {verb} it.",
    "Preference: {person} wants {adjective} {noun} updates in the {team} channel every {day}.",
    "Incident in {place}: the {adjective} {noun} of {project} failed and {person} {past} the {noun2}.",
    "To {verb} the {noun}, run the {tool} job from the {project} repo, then tell {person}.",
    "{person} moved to the {team} team in {place} and now handles {noun} {noun2} work.",
    "The {team} budget for {tool} is capped; {person} approved the {adjective} {noun} plan.",
    "{free}.",
    "Context: {free}, said {person}.",
    "{person} is out until {day}; {person2} covers the {noun} on-call for {project}.",
    "We stopped using {tool} for {noun} work after {reason}.",
    "{project} ships the {adjective} {noun} in {place} next {period}, pending {person}'s sign-off.",
    "Tip from {person}: check the {noun2} first when the {noun} looks {adjective}.",
    "The {noun} limit for {project} is set in {tool}; raising it needs a ticket for {team}.",
    "{person2} thinks {person} should {verb} the {noun} rather than the {noun2}.",
    "Customer in {place} asked why the {noun} was {adjective}; {person} replied on {day}.",
    "Standup: {person} {past} the {noun}, {person2} is blocked on {tool}, {free}.",
    "Lesson learned: never {verb} a {adjective} {noun} on a {day}.",
    "{person}'s favourite {noun} is the {adjective} one in {place}.",
    "The {team} retro said {reason}, so {project} will {verb} its {noun}.",
    "Password hints live in {tool}, not in the {noun}; {person} rotated them last {period}.",
    "Budget note: {tool} costs for {project} went up after {reason}.",
    "{person} and {person2} paired on the {noun} in {tool}; it now runs {adjective}.",
    "Do not page {person} about {noun} alerts before {day}; route them to {team}.",
    "Design doc for the {project} {noun} is in {tool}; {person} wants comments by {day}.",
]

DAYS = "Monday Tuesday Wednesday Thursday Friday".split()
PERIODS = "week month quarter sprint year".split()


def _zipf_weights(count: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, count + 1) ** exponent
    return weights / weights.sum()


class Corpus:
    """A seeded generator of memory texts and queries over one Zipfian vocabulary."""

    def __init__(self, seed: int = 0, *, tail_words: int = 30_000, exponent: float = 1.07):
        self.rng = np.random.default_rng(seed)
        made_up = self._made_up_words(tail_words)
        self.vocabulary = list(dict.fromkeys([*COMMON, *NOUNS, *VERBS, *ADJECTIVES, *TOOLS, *PROJECTS, *made_up]))
        self.weights = _zipf_weights(len(self.vocabulary), exponent)
        # Slot words are drawn with a flatter Zipf than the free vocabulary: at 0.9, single
        # nouns and names reached 40% of memories, twice what content words reach in real
        # chat (corpus_stats.py compares with LoCoMo); at 0.5 the most common ones land near 20%.
        self.lists = {
            name: (words, _zipf_weights(len(words), 0.5))
            for name, words in {
                "person": PEOPLE,
                "project": PROJECTS,
                "tool": TOOLS,
                "place": PLACES,
                "team": TEAMS,
                "verb": VERBS,
                "past": PAST,
                "noun": NOUNS,
                "adjective": ADJECTIVES,
                "reason": REASONS,
                "day": DAYS,
                "period": PERIODS,
            }.items()
        }
        self._buffers: dict[str, list] = {}

    def _made_up_words(self, count: int) -> list[str]:
        words, seen = [], set()
        rng = self.rng
        while len(words) < count:
            syllables = rng.integers(2, 4)
            word = "".join(
                _ONSETS[rng.integers(len(_ONSETS))]
                + _NUCLEI[rng.integers(len(_NUCLEI))]
                + _CODAS[rng.integers(len(_CODAS))]
                for _ in range(syllables)
            )
            if word not in seen and len(word) >= 4:
                seen.add(word)
                words.append(word.capitalize() if rng.random() < 0.3 else word)
        return words

    def _draw(self, name: str) -> str:
        """One Zipf-weighted draw from a slot's list, taken from a pre-drawn buffer (numpy per word is slow)."""
        buffer = self._buffers.get(name)
        if not buffer:
            if name == "free":
                words, weights = self.vocabulary, self.weights
            else:
                words, weights = self.lists[name]
            buffer = self._buffers[name] = [words[index] for index in self.rng.choice(len(words), 4096, p=weights)]
        return buffer.pop()

    def word(self) -> str:
        return self._draw("free")

    def _free(self) -> str:
        count = int(self.rng.integers(5, 14))
        return " ".join(self._draw("free") for _ in range(count)).capitalize()

    def sentence(self) -> str:
        template = TEMPLATES[int(self.rng.integers(len(TEMPLATES)))]
        values = {name: self._draw(name) for name in self.lists}
        values.update(
            person2=self._draw("person"),
            tool2=self._draw("tool"),
            noun2=self._draw("noun"),
            free=self._free() if "{free}" in template else "",
        )
        return template.format(**values)

    def text(self, *, low: int = 100, high: int = 300) -> str:
        """One memory text of ``low``..``high`` characters, whole sentences when they fit."""
        target = int(self.rng.integers(low, high + 1))
        parts, length = [], 0
        while length < target:
            sentence = self.sentence()
            parts.append(sentence)
            length += len(sentence) + 1
        text = " ".join(parts)
        if len(text) > high:
            cut = text.rfind(" ", 0, high)
            text = text[:cut].rstrip(",;:") + "."
        if len(text) < low:  # one short sentence: pad with a free phrase
            text = (text + " " + self._free() + ".")[:high]
        return text

    def revise(self, text: str) -> str:
        """A later revision of ``text``: a few words changed and a sentence added or dropped."""
        words = text.split(" ")
        for _ in range(max(1, len(words) // 8)):
            words[int(self.rng.integers(len(words)))] = self._draw("free")
        revised = " ".join(words)
        if self.rng.random() < 0.5 and len(revised) < 220:
            revised += " " + self.sentence()
        revised = revised[:300]
        if len(revised) == 300:
            revised = revised[: revised.rfind(" ")] + "."
        return revised

    def query_words(self, text: str, count: int) -> list[str]:
        """``count`` distinct words of ``text`` (letters only, 3+ characters), in text order."""
        words = [word.strip(".,;:!?'\"()").lower() for word in text.split()]
        words = list(dict.fromkeys(word for word in words if len(word) >= 3 and word.isalpha()))
        if len(words) <= count:
            return words
        chosen = sorted(self.rng.choice(len(words), count, replace=False))
        return [words[index] for index in chosen]
