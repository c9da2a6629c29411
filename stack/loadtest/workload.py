"""What each request asks: prompt, max_new_tokens and API key, from flags or a JSONL file.

Distributions are written `32` (fixed), `16-64` (uniform integers), `normal:32,8` (rounded,
at least 1) or `choice:8,16,32`. A prompts file holds one JSON object a line: `prompt` (required),
optional `max_new_tokens` (else the flag's distribution) and `weight` (relative frequency, 1).
Draws are seeded, so the same settings give the same requests in the same order.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

# synthetic prompts are windows of this text (ASCII: one character is one token, one byte)
_FILLER = (
    "the service answered every question about the order, the refund and the delivery date "
    "while the queue grew and the operators watched latency, throughput and errors on the "
    "dashboard; a customer asked again why the parcel was late and what the tracking number was "
)
WORKLOADS = Path(__file__).parent / "workloads"
# short prompts the benches cycle through (`Cycle`): every mode of a bench asks the same ones
PROMPTS = (
    "The service was",
    "Once upon a time",
    "Monitoring tells us",
    "In the morning the",
    "A model server",
    "The latency of",
    "She opened the door and",
    "Batching helps because",
)


class WorkloadError(ValueError):
    """A distribution spec or a prompts file the load test cannot use (one line)."""


@dataclass(frozen=True)
class Distribution:
    """Integer draws from a spec string (see the module docstring)."""

    spec: str

    def __post_init__(self) -> None:
        self.draw(random.Random(0))  # fail on a bad spec at construction

    def draw(self, rng: random.Random) -> int:
        """One draw, at least 1."""
        spec = self.spec.strip()
        kind, _, args = spec.partition(":")
        try:
            if not args and "-" in spec:
                lo, hi = (int(x) for x in spec.split("-", 1))
                if lo > hi:
                    raise ValueError
                value = rng.randint(lo, hi)
            elif not args:
                value = int(spec)
            elif kind == "normal":
                mean, std = (float(x) for x in args.split(","))
                value = round(rng.gauss(mean, std))
            elif kind == "choice":
                value = rng.choice([int(x) for x in args.split(",")])
            else:
                raise ValueError
        except ValueError:
            raise WorkloadError(
                f"bad distribution {self.spec!r}: want N, LO-HI, normal:MEAN,STD or choice:A,B,..."
            ) from None
        return max(1, value)


@dataclass(frozen=True)
class Item:
    """One request's content."""

    prompt: str
    max_new_tokens: int
    key_index: int = 0
    seed: int | None = None  # sampling seed and temperature: the server's defaults when None
    temperature: float | None = None


def load_prompts(path: Path) -> list[tuple[str, int | None, float]]:
    """(prompt, max_new_tokens or None, weight) per line of a JSONL prompts file."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise WorkloadError(f"cannot read prompts file {path}: {exc.strerror}") from None
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            prompt = doc["prompt"]
            max_new = doc.get("max_new_tokens")
            weight = float(doc.get("weight", 1.0))
            if not isinstance(prompt, str) or not prompt or weight <= 0:
                raise ValueError
            if max_new is not None and (not isinstance(max_new, int) or max_new < 1):
                raise ValueError
        except (ValueError, KeyError, TypeError, AttributeError):
            raise WorkloadError(
                f'{path}:{number}: want {{"prompt": non-empty text, "max_new_tokens"?: int '
                f'>= 1, "weight"?: > 0}}'
            ) from None
        out.append((prompt, max_new, weight))
    if not out:
        raise WorkloadError(f"{path} holds no prompts")
    return out


def synthetic_prompt(chars: int, rng: random.Random) -> str:
    """`chars` characters of the filler text from a random offset."""
    start = rng.randrange(len(_FILLER))
    text = (_FILLER * (chars // len(_FILLER) + 2))[start : start + chars]
    return text.strip() or "hello"


class Workload:
    """A seeded stream of Items: from a prompts file, or synthetic from distributions."""

    def __init__(
        self,
        prompt_chars: str = "32",
        max_new_tokens: str = "16",
        prompts_file: Path | None = None,
        keys: int = 1,
        seed: int = 0,
    ) -> None:
        self.prompt_chars = Distribution(prompt_chars)
        self.max_new_tokens = Distribution(max_new_tokens)
        self.prompts = load_prompts(prompts_file) if prompts_file is not None else None
        self.keys = max(1, keys)
        self._rng = random.Random(seed)
        self._n = 0

    def next(self) -> Item:
        """The next request (keys taken in turn)."""
        rng = self._rng
        if self.prompts is not None:
            weights = [w for _, _, w in self.prompts]
            prompt, max_new, _ = rng.choices(self.prompts, weights=weights)[0]
            new = max_new if max_new is not None else self.max_new_tokens.draw(rng)
        else:
            prompt = synthetic_prompt(self.prompt_chars.draw(rng), rng)
            new = self.max_new_tokens.draw(rng)
        item = Item(prompt, new, self._n % self.keys)
        self._n += 1
        return item


class Cycle:
    """The i-th request asks PROMPTS[i % len(PROMPTS)] with seed i (counting from `first`), so
    two runs from the same `first` ask the same requests in the same order, whatever the mode."""

    def __init__(
        self,
        max_new_tokens: int,
        temperature: float | None = None,
        first: int = 0,
        seeded: bool = True,
        prompts: tuple[str, ...] = PROMPTS,
    ) -> None:
        self.max_new_tokens, self.temperature, self.seeded = max_new_tokens, temperature, seeded
        self.prompts, self._i = prompts, first

    def next(self) -> Item:
        """The next request."""
        i, self._i = self._i, self._i + 1
        seed = i if self.seeded else None
        prompt = self.prompts[i % len(self.prompts)]
        return Item(prompt, self.max_new_tokens, seed=seed, temperature=self.temperature)
