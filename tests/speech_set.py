"""The labelled speech set of the voice work (issues #34 and #41): what learners say in every pack,
with its labels committed (tests/data/speech_set.json) and its audio made at run time.

Labels (`Line`): the text, its language (`en`, or the romanized `hi-EN`, `ja-JP`, `ar-MA`), the
pack, the item in hand and the vendor's quote at that moment, the price the offer reader must read
(None: no offer) and a kind: `line` (the pack's own English: coaching lines and hints),
`price` (an offer with a price drawn in the item's band), `free` (everyday English written for
this set, in no pack: free speech) and `local` (the pack's romanized hints, phrases and cues).

Audio (`render`): espeak-ng in several voices and speeds (`VOICES`, `SPEEDS`; each line gets two of
the combinations, chosen with the line's seed), clean and with white noise at 20 dB and 10 dB SNR
(numpy's generator seeded from the line and the variant), as PCM16 mono 16 kHz, cached under
var/speech_set/ (not committed). `python -m tests.speech_set` rewrites the labels;
tests/test_scene_stt.py checks the committed file is what this code makes.
"""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from schemas.scenario import Item, Scenario, available_scenarios, load_scenario
from voice.numerals import spoken_number

ROOT = Path(__file__).resolve().parent.parent
LABELS = ROOT / "tests" / "data" / "speech_set.json"
AUDIO = ROOT / "var" / "speech_set"
SEED = 41
VOICES = ("en-us", "en-us+f3", "en-gb", "en-us+m3")
SPEEDS = (140, 175)
NOISE_DB = (None, 20, 10)
LOCAL = {"jaipur-bazaar": "hi-EN", "kyoto-antiques": "ja-JP", "marrakech-souk": "ar-MA"}
OFFERS = ("I will give you {n} {cur}.", "{n} {cur}, final offer.", "How about {n} {cur} for the {item}?",
          "Okay, {n} {cur}, deal?", "That is too expensive. I will give you {n} {cur}.", "Can you do {n} {cur}?",
          "My best offer is {n} {cur}.", "I can pay {n} {cur}, no more.")
FREE = ("My sister told me about your shop.", "We are visiting the city for a week.",
        "Is there a good place to eat near here?", "I am buying a present for my mother.",
        "Can you tell me the way to the station?", "It is very hot today.",
        "I am learning to speak with shopkeepers.", "Do you open early in the morning?",
        "My friend bought one of these last year.", "I need to ask my husband first.")


@dataclass(frozen=True, slots=True)
class Line:
    id: str
    text: str
    language: str
    pack: str
    item: str
    quote: int
    price: int | None
    kind: str


def _price(rng: random.Random, item: Item) -> int:
    low, high = item.fair[0] // 2, item.tourist_quote[0]
    step = 5 if high <= 300 else 10 if high <= 1200 else 500
    return max(step, rng.randrange(low, high + 1) // step * step)


def _fill(text: str, item: Item, price: int, offer: int) -> str:
    return (text.replace("{local}", item.local).replace("{items}", item.spoken or item.name.lower())
            .replace("{offer}", str(offer)).replace("{price}", str(price)))


def pack_lines(scenario: Scenario, rng: random.Random) -> list[Line]:
    out: list[Line] = []
    pack = scenario.scenario
    items = [i for i in scenario.items if i.in_scene] or list(scenario.items)

    def add(text: str, language: str, item: Item, quote: int, price: int | None, kind: str) -> None:
        out.append(Line(f"{pack}-{len(out):03d}", text, language, pack, item.name, quote, price, kind))

    for key, help_ in sorted(scenario.coaching.items()):
        item = rng.choice(items)
        quote, offer = item.tourist_quote[0], _price(rng, item)
        english = _fill(help_.english, item, quote, offer)
        wants = offer if "{offer}" in help_.english else quote if "{price}" in help_.english else None
        add(english, "en", item, quote, wants, "line")
        hint = scenario.hints.get(key)
        if hint is not None:
            text = _fill(hint, item, quote, offer)
            wants = offer if "{offer}" in hint else quote if "{price}" in hint else None
            add(text, "en" if key in ("open", "counter") and pack == "kyoto-antiques" else LOCAL[pack], item, quote,
                wants, "local")
    for i in range(16):
        item = rng.choice(items)
        quote = item.tourist_quote[0]
        offer = _price(rng, item)
        text = OFFERS[i % len(OFFERS)].format(n=spoken_number(offer) if i % 3 == 0 else offer,
                                              cur=scenario.currency_word, item=item.spoken or item.name.lower())
        add(text, "en", item, quote, offer, "price")
    for phrase in scenario.phrases:
        item = rng.choice(items)
        add(phrase.text, LOCAL[pack], item, item.tourist_quote[0], None, "local")
    cues = scenario.cues
    for cue in (*cues.greeting[:2], *cues.inquiry[:2], *cues.pushback[:2], *cues.accept[:2], *cues.walk[:2]):
        item = rng.choice(items)
        add(cue.capitalize() + ".", LOCAL[pack], item, item.tourist_quote[0], None, "local")
    for text in rng.sample(FREE, 4):
        item = rng.choice(items)
        add(text, "en", item, item.tourist_quote[0], None, "free")
    return out


def labels() -> list[Line]:
    rng = random.Random(SEED)
    return [line for name in sorted(available_scenarios()) for line in pack_lines(load_scenario(name), rng)]


def load_labels() -> list[Line]:
    return [Line(**row) for row in json.loads(LABELS.read_text("utf-8"))]


@dataclass(frozen=True, slots=True)
class Variant:
    voice: str
    speed: int
    noise_db: int | None

    @property
    def tag(self) -> str:
        return f"{self.voice}-{self.speed}-{'clean' if self.noise_db is None else f'{self.noise_db}dB'}"


def variants(line: Line) -> list[Variant]:
    """Two voice-speed pairs per line (from the line's seed), each clean and at 20 and 10 dB."""
    rng = random.Random(f"{SEED}:{line.id}")
    pairs = rng.sample([(v, s) for v in VOICES for s in SPEEDS], 2)
    return [Variant(v, s, n) for v, s in pairs for n in NOISE_DB]


def _espeak(text: str, voice: str, speed: int) -> bytes:
    from voice.audio import decode_clip

    wav = subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "--stdout", "--stdin"],
                         input=text.encode("utf-8"), capture_output=True, check=True, timeout=30).stdout
    return decode_clip(wav)


def add_noise(pcm: bytes, snr_db: float, seed: str) -> bytes:
    """White Gaussian noise at `snr_db` below the speech's power (the signal's mean square over its
    samples louder than 1 % of full scale, so pauses do not dilute it)."""
    import numpy as np

    signal = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    loud = signal[np.abs(signal) > 327]
    power = float(np.mean((loud if loud.size else signal) ** 2)) or 1.0
    rng = np.random.default_rng(int(hashlib.sha256(seed.encode()).hexdigest()[:12], 16))
    noisy = signal + rng.normal(0.0, (power / 10 ** (snr_db / 10)) ** 0.5, signal.shape)
    return bytes(np.clip(noisy, -32768, 32767).astype("<i2").tobytes())


def render(line: Line, variant: Variant, cache: Path | None = AUDIO) -> bytes:
    """The line spoken in `variant`, PCM16 mono 16 kHz (cached as raw PCM under `cache`)."""
    path = None
    if cache is not None:
        digest = hashlib.sha256(f"{line.text}|{variant.tag}".encode()).hexdigest()[:16]
        path = cache / f"{line.id}-{variant.tag}-{digest}.pcm"
        if path.exists():
            return path.read_bytes()
    pcm = _espeak(line.text, variant.voice, variant.speed)
    if variant.noise_db is not None:
        pcm = add_noise(pcm, variant.noise_db, f"{SEED}:{line.id}:{variant.tag}")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pcm)
    return pcm


if __name__ == "__main__":
    rows = [asdict(line) for line in labels()]
    LABELS.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"{len(rows)} lines -> {LABELS.relative_to(ROOT)}")


# ---------------------------------------------------------------------------- scoring a transcript

_NUMBER_WORDS = frozenset(spoken_number(n) for n in range(0, 20)) | frozenset(
    spoken_number(n) for n in range(20, 100, 10)) | {"hundred", "thousand"}


def norm_words(text: str) -> list[str]:
    """Words compared for the error rate: as the dictionary spells them, "and" inside a number
    dropped (espeak-ng says "one hundred and twenty", the recogniser may not)."""
    from voice.scene_corpus import words

    found = words(text)
    return [w for i, w in enumerate(found)
            if not (w == "and" and 0 < i < len(found) - 1 and found[i - 1] in _NUMBER_WORDS
                    and found[i + 1] in _NUMBER_WORDS)]


def price_heard(line: Line, text: str) -> int | None:
    """The price the offer reader takes from `text`, at the line's moment (its quote and item)."""
    from session.number_lexicon import number_lexicon
    from session.offers import read_offer

    scenario = load_scenario(line.pack)
    item = scenario.item(line.item)
    reading = read_offer(text, line.quote, number_lexicon(scenario.vendor.languages),
                         unit=item.unit if item else "kg")
    return reading.price if reading is not None and reading.sure else None


@dataclass(frozen=True, slots=True)
class Judged:
    errors: int
    words: int
    price_ok: bool
    right: bool


def judge(line: Line, heard: str) -> Judged:
    """How a transcript fares: word errors against the line, the price read as the line's, and
    right overall (the price right and at most a quarter of the words wrong)."""
    from voice.confidence import edit_distance

    ref, hyp = norm_words(line.text), norm_words(heard)
    errors = edit_distance(ref, hyp)
    price_ok = price_heard(line, " ".join(hyp)) == line.price
    return Judged(errors, len(ref), price_ok, price_ok and errors <= 0.25 * len(ref))


# ---------------------------------------------------------------------------- figures over a sample


@dataclass
class Tally:
    """Figures of one recogniser over a sample, by the line's kind and language."""

    errors: int = 0
    words: int = 0
    prices: int = 0
    prices_ok: int = 0
    n: int = 0
    right: int = 0
    accepted: int = 0  # at or above the clarify threshold
    accepted_wrong: int = 0
    seconds: float = 0.0  # of speech
    cpu: float = 0.0  # seconds of CPU decoding it

    def add(self, line: Line, judged: Judged, confidence: float, threshold: float, seconds: float,
            cpu: float) -> None:
        self.errors += judged.errors
        self.words += judged.words
        if line.price is not None:
            self.prices += 1
            self.prices_ok += judged.price_ok
        self.n += 1
        self.right += judged.right
        if confidence >= threshold:
            self.accepted += 1
            self.accepted_wrong += not judged.right
        self.seconds += seconds
        self.cpu += cpu

    def figures(self) -> dict[str, float | int | None]:
        return {"n": self.n, "wer": _share(self.errors, self.words),
                "price_accuracy": _share(self.prices_ok, self.prices), "prices": self.prices,
                "right": _share(self.right, self.n), "accepted": self.accepted,
                "wrong_above_threshold": _share(self.accepted_wrong, self.n),
                "wrong_among_accepted": _share(self.accepted_wrong, self.accepted),
                # "please repeat" to a line heard right: right transcripts under the threshold
                "false_repeat": _share(self.right - (self.accepted - self.accepted_wrong), self.right),
                "cpu_ms_per_s": round(1000 * self.cpu / self.seconds, 1) if self.seconds else None}


def _share(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def group_of(line: Line) -> str:
    """The figures a line counts in: English (lines, prices and free speech) or its language."""
    return "en" if line.language == "en" else line.language
