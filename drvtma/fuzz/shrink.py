"""Shrinking failures with hypothesis, and the example database that keeps them between campaigns.

A campaign case's recorded choices are exactly the choices hypothesis would make to build it with
`HypothesisChooser` (`drvtma.fuzz.choosers`). So a failure is shrunk by saving its choices in an example database
and asking `hypothesis.find` (phases reuse + shrink) for the smallest case that still fails: hypothesis replays the
saved choices first, then shrinks them. The shrunk choices stay in the persistent database under a key per target
and options, and the next campaign replays them before anything else.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from unittest import SkipTest

from .. import settings
from ..compat import hypothesis_choices_to_bytes, hypothesis_random_seeded
from ..errors import ArgumentError
from .choosers import HypothesisChooser
from .targets import Failure, Outcome

DEFAULT_DB = Path.home() / ".cache" / "drvtma" / "fuzz-db"
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def local_db_path() -> Path:
    """This machine's example database folder: $DRVTMA_FUZZ_DB, else ~/.cache/drvtma/fuzz-db (read at each call)."""
    return Path(settings.FUZZ_DB.get() or DEFAULT_DB)


def is_redis_url(text) -> bool:
    return isinstance(text, str) and text.startswith(REDIS_SCHEMES)


def _redis_database(url: str):
    """hypothesis' RedisExampleDatabase on `url`, checked with a ping now (not at the first failure)."""
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:  # like --png without matplotlib: an extra to install, a usage error
        raise ArgumentError("redis_extra", "--db", url, "install the redis extra (pip install 'drvtma[redis]') or "
                            "give a folder", "a Redis database needs the redis package") from None
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ArgumentError("fuzz_db", "--db", url, "start the Redis server or give a reachable URL",
                            f"no Redis answers there ({exc})") from None
    return RedisExampleDatabase(client)


def open_database(path=None):
    """The example database: None -> the local folder (`local_db_path`); a folder (on a shared disk) or a Redis URL
    -> that one multiplexed with the local folder, so every shard's failures replay everywhere and here."""
    from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase

    local = DirectoryBasedExampleDatabase(str(local_db_path()))
    if path is None or (not is_redis_url(path) and Path(path).resolve() == local_db_path().resolve()):
        return local
    shared = _redis_database(path) if is_redis_url(path) else DirectoryBasedExampleDatabase(str(path))
    return MultiplexedDatabase(shared, local)


def database_key(target, options: dict) -> bytes:
    """Failures of one target with one set of options (the builder they replay in) share a key."""
    text = json.dumps({"target": target.name, "version": target.version, "options": options}, sort_keys=True)
    return b"drvtma-fuzz:" + hashlib.sha256(text.encode()).hexdigest()[:32].encode()


def case_strategy(target, options: dict):
    """The target's builder as a hypothesis strategy (drawing through HypothesisChooser)."""
    from hypothesis import reject
    from hypothesis import strategies as st

    def build(draw):
        try:
            return target.build(HypothesisChooser(draw), options)
        except (ValueError, RuntimeError, AssertionError):  # a builder that cannot honour these draws
            reject()

    return st.composite(build)()


class _OutOfTime(BaseException):
    """Raised through hypothesis (not an Exception: not taken for a failure of the case) to end `find` at the
    deadline; hypothesis would otherwise keep shrinking, each new candidate refused, for up to 5 minutes."""


class _Checker:
    """Runs candidates on the session, remembers each answer, and stops hypothesis after the deadline."""

    def __init__(self, target, session, deadline: float):
        self.target, self.session, self.deadline = target, session, deadline
        self.answers: dict[str, Outcome] = {}
        self.calls = 0
        self.last_failing = None  # while shrinking, each failing candidate is hypothesis' new smallest

    def key(self, case) -> str:
        return json.dumps(self.target.case_to_json(case), sort_keys=True, default=str)

    def fails(self, case) -> bool:
        key = self.key(case)
        if key not in self.answers:
            if time.perf_counter() > self.deadline:
                raise _OutOfTime
            self.calls += 1
            self.answers[key] = self.session.check([case])[0]
        if not self.answers[key].ok:
            self.last_failing = case
        return not self.answers[key].ok


def _find(target, options, checker: _Checker, database, key: bytes, phases, seed: bytes, max_examples: int = 1000):
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample, Unsatisfiable

    config = settings(database=database, phases=[getattr(Phase, p) for p in phases], max_examples=max_examples,
                      deadline=None, suppress_health_check=list(HealthCheck))
    # Seeded by what is shrunk (not by the options, which name paths): hypothesis' own random otherwise carries over
    # from whatever ran before in this process, and the same failure would shrink to another case alone and in a
    # test suite. Not through find's `random`: a seeded test neither reads nor writes the example database.
    number = int.from_bytes(hashlib.sha256(seed).digest()[:8], "little")
    try:
        with hypothesis_random_seeded(number):
            return find(case_strategy(target, options), checker.fails, settings=config, database_key=key)
    except (NoSuchExample, Unsatisfiable, SkipTest):  # SkipTest: hypothesis ran no case at all
        return None
    except _OutOfTime:
        return checker.last_failing


def shrink_failure(target, options: dict, session, failure, database=None, *, seconds: float = 60.0) -> None:
    """Shrink one failure in place (failure.shrunk_case / shrunk_outcome / shrink) and save it to `database`."""
    from hypothesis.database import InMemoryExampleDatabase

    started = time.perf_counter()
    checker = _Checker(target, session, started + seconds)
    work = InMemoryExampleDatabase()  # this failure only: the persistent database may hold other, smaller ones
    key = database_key(target, options)
    seed = f"{target.name} {checker.key(failure.case)}".encode()
    encode = hypothesis_choices_to_bytes()
    minimal, method = None, "none"
    if encode is not None:
        # Hypothesis takes examples under its primary key as shrunk already and replays them only; the secondary
        # corpus ("failed once") is replayed and then shrunk.
        work.save(key + b".secondary", encode(target.focus(failure.trace, failure.case, failure.outcome)))
        minimal = _find(target, options, checker, work, key, ("reuse", "shrink"), seed)
        method = "hypothesis: replay and shrink"
    if minimal is None:  # the choices did not replay (another hypothesis version): let hypothesis search
        minimal = _find(target, options, checker, work, key, ("generate", "shrink"), seed, max_examples=300)
        method = "hypothesis: search and shrink"
    if minimal is None:
        failure.shrunk_case, failure.shrunk_outcome = failure.case, failure.outcome
        method = "not shrunk (no smaller failing case found)"
    else:
        failure.shrunk_case, failure.shrunk_outcome = minimal, checker.answers[checker.key(minimal)]
        stored = sorted(work.fetch(key), key=lambda v: (len(v), v))
        if database is not None and stored:
            database.save(key, stored[0])  # the shortest choices: hypothesis' smallest failing example
    failure.shrink = {"method": method, "calls": checker.calls, "seconds": round(time.perf_counter() - started, 3)}


def shrink_failures(target, options: dict, session, failures, database=None, *, seconds: float = 60.0) -> None:
    for failure in failures:
        shrink_failure(target, options, session, failure, database, seconds=seconds)


def replay_known(target, options: dict, session, database, *, seconds: float = 30.0):
    """Every failure stored for this target and options, replayed (and shrunk further) first: the ones that
    still fail come back as Failures; the ones that pass now are deleted from the database."""
    from hypothesis.database import InMemoryExampleDatabase

    key = database_key(target, options)
    found: list[Failure] = []
    for value in list(database.fetch(key)):
        checker = _Checker(target, session, time.perf_counter() + seconds)
        work = InMemoryExampleDatabase()
        work.save(key, value)
        case = _find(target, options, checker, work, key, ("reuse", "shrink"), value)
        if case is None:
            database.delete(key, value)
            continue
        if any(checker.key(f.case) == checker.key(case) for f in found):
            database.delete(key, value)  # two stored examples that shrink to the same case: keep one
            continue
        outcome = checker.answers[checker.key(case)]
        failure = Failure(None, case, [], outcome, case, outcome,
                          {"method": "hypothesis: replayed from the database", "calls": checker.calls})
        found.append(failure)
    return found
