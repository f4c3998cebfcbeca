"""Deterministic, realistic memory facts and questions (seeded), shaped like what agents save.

Each fact is 10-40 words built from templates an agent memory actually holds: preferences, people,
meetings, incidents, decisions, plans. Slots draw on people's names, cities, project code names (a
generated long tail, Zipf-weighted), tools, ticket ids, file names, dates, times, money and counts, so
the vocabulary has the head-and-long-tail shape of real text. Questions are written from the slots of
facts drawn the same way, so most have answers in the corpus and share its vocabulary.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from pathlib import Path

FIRST = """Alice Bob Carol Dmitri Elena Farid Grace Hiro Ines Jonas Kemal Lena Mateo Nadia Oscar Priya Quentin
Rosa Sven Tomoko Umar Vera Wen Ximena Yusuf Zoe Amara Bruno Chiara Diego Esther Felix Greta Hassan Ingrid
Jamal Kira Luca Maya Nikolai Olga Pablo Quinn Ravi Sofia Tariq Ursula Viktor Wanda Xavier Yara Zane Aiko Boris
Celine Dario Emil Fatima Gustav Helena Ivan Julia Kofi Leila Marco Nora Omar Petra Rafael Sara Theo Uma Vlad
Willa Yosef Zara Anton Beatriz Cyrus Daphne Emeka Freya Gideon Hana Idris Jana Kai Lorenzo Mira Nils""".split()
LAST = """Novak Okafor Lindqvist Tanaka Moreau Haddad Kowalski Fischer Rossi Costa Nakamura Petrov Silva Jensen
Müller Dubois Oyelaran Brennan Castillo Ivanova Schmidt Yilmaz Andersen Bianchi Horvat Kaur Larsen Mendes
Nguyen Obi Pereira Quispe Ramos Sato Tran Varga Weber Zhang Abara Becker Chowdhury Duarte Eriksen Ferreira
Gallo Hoffmann Ito Jovanovic Kim Lopez Mwangi Nowak Ortega Park Reyes Santos Takahashi Urban Vogel Wagner""".split()
CITIES = """Lisbon Berlin Nairobi Osaka Toronto Lyon Kraków Austin Bogotá Seoul Oslo Porto Dublin Denver Madrid
Helsinki Lagos Melbourne Prague Zürich Istanbul Chennai Quito Vienna Boston Tallinn Accra Kyoto Seattle Milan
Rotterdam Montreal Hanoi Lima Cairo Tbilisi Valencia Auckland Riga Dakar""".split()
TOOLS = """PostgreSQL Redis Kafka Terraform Kubernetes Docker Grafana Prometheus Sentry Jenkins GitHub GitLab
Slack Jira Notion Figma Airflow Snowflake BigQuery Elasticsearch RabbitMQ nginx Vault Ansible pytest FastAPI
Django React Svelte Vite webpack Rust Go TypeScript Kotlin Swift Flutter Celery DuckDB ClickHouse Helm ArgoCD
Datadog PagerDuty Linear Bazel Gradle Poetry uv ruff mypy""".split()
NOUNS = """release deadline budget invoice migration schema dashboard roadmap contract onboarding incident
outage backup rollout review retrospective interview offsite workshop demo prototype benchmark audit
certificate license vendor customer renewal refund payroll hiring sprint milestone backlog estimate proposal
newsletter podcast conference keynote flight hotel visa passport dentist appointment birthday anniversary
recipe garden marathon bicycle guitar piano violin painting pottery novel thriller documentary apartment
lease mortgage insurance laptop monitor keyboard headphones printer router firmware password token quota
latency throughput memory cache index query endpoint webhook pipeline cluster replica shard bucket queue
worker cron alert runbook postmortem dependency upgrade regression flaky test coverage linter formatter
branch commit tag changelog translation accessibility font palette logo mockup wireframe survey feedback""".split()
VERBS = """ship review migrate rewrite archive benchmark document refactor deploy rollback upgrade pin
replace split merge automate monitor profile cache shard rotate renew cancel reschedule book confirm
approve reject escalate delegate summarise translate test draft publish announce postpone""".split()
ADJECTIVES = """concise detailed async quiet early late remote weekly monthly quarterly urgent optional
strict lenient cheap expensive vegetarian spicy minimal verbose typed dark light local offline blue
green careful pragmatic formal casual""".split()
FOODS = """ramen tacos sushi falafel paella pho dumplings risotto curry shakshuka pierogi ceviche bibimbap
croissants espresso matcha kombucha oat-milk lattes sourdough""".split()
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = "January February March April May June July August September October November December".split()
_SYLLABLES = "ka lo mi ra te zu vo ne si pa do fe gu hi ja ku le mo nu ri sa ti vu we xa yo ze bri tor quin".split()

TEMPLATES = (
    "{person} prefers {adj} {noun} updates over long meetings, especially while {project} is in {noun2}.",
    "Met {person} in {city} on {date} to discuss the {project} {noun}; agreed to {verb} the {noun2} by {date2}.",
    "The {project} {tool} deploy of commit {sha} failed with exit code {code} after {count} retries; the fix "
    "was to {verb} the {noun} and pin {tool2} to {version}.",
    "{person}'s birthday is on {day} {month}; they love {food} and would enjoy a {adj} dinner in {city}.",
    "Decision on {date}: {project} moves from {tool} to {tool2} because {noun} latency was {count} ms at p95.",
    "{person} owns {ticket} about the {noun} in {file} (branch {sha}); reviewer is {person2}, due {weekday} at {time}.",
    "Don't {verb} the {project} {noun} on {weekday}s; instead {verb2} it after the {noun2} at {time}.",
    "Budget for the {project} {noun} is {money} per month, approved by {person} on {date}.",
    "User likes {adj} answers, uses {tool} daily and keeps notes on {project} in {file}.",
    "{person} moved from {city} to {city2} in {month} {year} and now leads the {project} {noun} team.",
    "Incident {ticket}: {tool} {noun} ran out of quota at {time} on {date}; {count} customers saw errors "
    "until {person} rotated the {noun2}.",
    "Remember to {verb} the {noun} for {person} before {date}; they asked twice and {person2} is waiting on it.",
    "The {project} {noun} lives in {file} and is checked by {tool} on every {noun2}.",
    "{person} recommended the {adj} {noun} by {person2}; read it on the flight from {city} to {city2}.",
    "Weekly sync for {project} is {weekday} at {time} with {person}, {person2} and {count} others.",
)
QUESTIONS = (
    "What does {person} prefer for {noun} updates?",
    "When did I meet {person} in {city}?",
    "Why did the {project} deploy fail?",
    "When is {person}'s birthday?",
    "Why did {project} move away from {tool}?",
    "Who owns {ticket}?",
    "When should I {verb2} the {project} {noun}?",
    "What is the budget for the {project} {noun}?",
    "Which tool does the user use daily?",
    "Where did {person} move to in {year}?",
    "What happened in incident {ticket}?",
    "What did {person2} ask me to {verb}?",
    "Where does the {project} {noun} live?",
    "Which {noun} did {person} recommend?",
    "When is the {project} weekly sync?",
)


def code_names(count: int, rng: random.Random) -> list[str]:
    names: set[str] = set()
    while len(names) < count:
        names.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize())
    return sorted(names)


def zipf_weights(count: int, exponent: float = 1.05) -> list[float]:
    return list(itertools.accumulate(1.0 / (rank + 1) ** exponent for rank in range(count)))


class Corpus:
    def __init__(self, seed: int = 7, projects: int = 20_000) -> None:
        self.rng = random.Random(seed)
        # The project list is fixed by its own seed so facts and questions share code names.
        self.projects = code_names(projects, random.Random(1234))
        self.project_weights = zipf_weights(projects)
        self.people = [f"{f} {last}" for f in FIRST for last in LAST]
        tops = ["user-preferences", "project-context", "anti-patterns", "people", "events", "tools", "notes"]
        self.categories = [f"{t}/{p.lower()}" for t in tops for p in self.projects[:30]] + tops
        self.tags = [p.lower() for p in self.projects[:300]] + [t.lower() for t in TOOLS]

    def slots(self) -> dict[str, str]:
        rng = self.rng
        (project,) = rng.choices(self.projects, cum_weights=self.project_weights)
        return {
            "person": rng.choice(self.people),
            "person2": rng.choice(FIRST),
            "city": rng.choice(CITIES),
            "city2": rng.choice(CITIES),
            "project": project,
            "tool": rng.choice(TOOLS),
            "tool2": rng.choice(TOOLS),
            "noun": rng.choice(NOUNS),
            "noun2": rng.choice(NOUNS),
            "verb": rng.choice(VERBS),
            "verb2": rng.choice(VERBS),
            "adj": rng.choice(ADJECTIVES),
            "food": rng.choice(FOODS),
            "day": str(rng.randint(1, 28)),
            "month": rng.choice(MONTHS),
            "year": str(rng.randint(2015, 2026)),
            "weekday": rng.choice(WEEKDAYS),
            "time": f"{rng.randint(7, 19)}:{rng.choice(('00', '15', '30', '45'))}",
            "date": f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.randint(2023, 2026)}",
            "date2": f"{rng.choice(WEEKDAYS)} {rng.randint(1, 28)} {rng.choice(MONTHS)}",
            "code": str(rng.choice((1, 2, 126, 127, 137, 139, 143, 255))),
            "count": str(rng.randint(2, 900)),
            "money": f"${rng.randint(1, 90) * 50:,}",
            "version": f"{rng.randint(1, 17)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
            "ticket": f"{project[:4].upper()}-{rng.randint(10, 9999)}",
            "sha": f"{rng.getrandbits(28):07x}",
            "file": f"{rng.choice(NOUNS)}_{rng.choice(NOUNS)}.{rng.choice(('py', 'md', 'yaml', 'ts', 'sql'))}",
        }

    def fact(self) -> str:
        rng = self.rng
        parts = [rng.choice(TEMPLATES).format(**self.slots())]
        if rng.random() < 0.4:  # a second, shorter clause: facts run 10-40 words
            second = rng.choice(TEMPLATES).format(**self.slots()).split(";")[0].rstrip(".")
            parts.append("Also: " + " ".join(second.split()[:12]) + ".")
        return " ".join(parts)

    def record(self, i: int) -> dict[str, object]:
        rng = self.rng
        return {
            "content": self.fact(),
            "category": rng.choice(self.categories) if rng.random() < 0.9 else None,
            "tags": rng.sample(self.tags, rng.randint(0, 3)),
            "importance": round(rng.random(), 2),
            "created_at": f"2026-{1 + i % 10:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
        }

    def records(self, count: int) -> Iterator[dict[str, object]]:
        for i in range(count):
            yield self.record(i)

    def queries(self, count: int) -> list[str]:
        return [self.rng.choice(QUESTIONS).format(**self.slots()) for _ in range(count)]


def write_jsonl(path: Path, count: int, seed: int = 7) -> Path:
    corpus = Corpus(seed)
    with path.open("w", encoding="utf-8") as f:
        for record in corpus.records(count):
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path
